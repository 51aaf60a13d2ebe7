//! Where the binary's log lines go: gathered in memory and written to stderr by a thread of their own every
//! [`FLUSH_EVERY`] (at once past [`FLUSH_AT`] bytes), so that a busy server, which logs every request, does not
//! make one `write(2)` per request. Lines stay whole and in order. [`LogWriter::flush`] writes what is left:
//! the binary calls it before it exits and when it panics, so at most [`FLUSH_EVERY`] of lines can be lost, and
//! only when the process is killed.

use std::io::Write;
use std::sync::{Mutex, MutexGuard, Once, OnceLock};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// How often the flushing thread writes the gathered lines.
pub const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// Gathered bytes past which the logging thread writes them itself.
pub const FLUSH_AT: usize = 64 * 1024;

pub struct LogWriter {
    pending: Mutex<Vec<u8>>,
    /// The destination; holding it while taking `pending` keeps chunks in order.
    out: Mutex<Box<dyn Write + Send>>,
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl LogWriter {
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        Self {
            pending: Mutex::new(Vec::with_capacity(FLUSH_AT)),
            out: Mutex::new(out),
        }
    }

    /// The process's writer to stderr; its flushing thread starts on first use.
    pub fn global() -> &'static LogWriter {
        static WRITER: OnceLock<LogWriter> = OnceLock::new();
        static FLUSHER: Once = Once::new();
        let writer = WRITER.get_or_init(|| LogWriter::new(Box::new(std::io::stderr())));
        FLUSHER.call_once(|| {
            // Should the thread not start, lines are still written past `FLUSH_AT` and at exit.
            let _ = std::thread::Builder::new()
                .name("tidings-log".into())
                .spawn(move || loop {
                    std::thread::sleep(FLUSH_EVERY);
                    writer.flush();
                });
        });
        writer
    }

    fn append(&self, line: &[u8]) {
        let full = {
            let mut pending = lock(&self.pending);
            pending.extend_from_slice(line);
            pending.len() >= FLUSH_AT
        };
        if full {
            self.flush();
        }
    }

    /// Writes every gathered line now.
    pub fn flush(&self) {
        let mut out = lock(&self.out);
        let chunk = {
            let mut pending = lock(&self.pending);
            if pending.is_empty() {
                return;
            }
            std::mem::replace(&mut *pending, Vec::with_capacity(FLUSH_AT))
        };
        // Nowhere to report a failing stderr.
        let _ = out.write_all(&chunk);
        let _ = out.flush();
    }
}

impl<'a> MakeWriter<'a> for &'static LogWriter {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line(self)
    }
}

/// One event's output, appended whole (the formatter writes each event with one `write_all`).
pub struct Line(&'static LogWriter);

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.append(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_are_written_in_order_when_flushed_or_past_the_threshold() {
        let out = Shared::default();
        let writer = LogWriter::new(Box::new(out.clone()));
        writer.append(b"one\n");
        writer.append(b"two\n");
        assert!(out.0.lock().unwrap().is_empty());
        writer.flush();
        assert_eq!(out.0.lock().unwrap().as_slice(), b"one\ntwo\n");
        writer.flush();
        assert_eq!(out.0.lock().unwrap().len(), 8);

        let long = vec![b'x'; FLUSH_AT];
        writer.append(b"three\n");
        writer.append(&long);
        let written = out.0.lock().unwrap().clone();
        assert_eq!(written.len(), 8 + 6 + FLUSH_AT);
        assert!(written.starts_with(b"one\ntwo\nthree\nxxx"));
    }
}
