//! A small SMTP server on `127.0.0.1:<random port>` standing in for a mail relay: it speaks enough of
//! RFC 5321 for a real client (EHLO/HELO, AUTH PLAIN and LOGIN, MAIL FROM, RCPT TO, DATA, RSET, NOOP, QUIT;
//! no STARTTLS), records every accepted mail with its envelope and credentials, and can be told to refuse
//! recipients.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// One mail the server accepted.
#[derive(Debug, Clone, Default)]
pub struct Mail {
    /// The EHLO/HELO argument.
    pub helo: String,
    /// `(user, password)` from AUTH, when the client authenticated.
    pub auth: Option<(String, String)>,
    /// The envelope sender (`MAIL FROM`).
    pub from: String,
    /// The envelope recipients (`RCPT TO`), in order.
    pub rcpt: Vec<String>,
    /// The message as sent after DATA (dot-stuffing undone, CRLF line ends).
    pub data: String,
}

impl Mail {
    /// The first value of header `name` among the top-level headers, unfolded.
    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.data.split("\r\n\r\n").next().unwrap_or_default();
        let mut value: Option<String> = None;
        for line in head.split("\r\n") {
            let folded = line.starts_with([' ', '\t']);
            match (value.as_mut(), folded) {
                (Some(v), true) => v.push_str(line),
                (Some(_), false) => break,
                (None, false) => {
                    if let Some((k, v)) = line.split_once(':') {
                        if k.eq_ignore_ascii_case(name) {
                            value = Some(v.trim().to_owned());
                        }
                    }
                }
                (None, true) => {}
            }
        }
        value
    }
}

#[derive(Default)]
struct State {
    mails: Vec<Mail>,
    /// `MAIL FROM` commands seen, accepted mail or not.
    transactions: usize,
    /// The answer to every `RCPT TO`, when it should fail.
    rcpt_reply: Option<String>,
}

/// A running SMTP server; stops when dropped.
pub struct SmtpServer {
    pub host: String,
    pub port: u16,
    state: Arc<Mutex<State>>,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl SmtpServer {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut rx => return,
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { return };
                        let state = shared.clone();
                        tokio::spawn(async move {
                            let _ = session(stream, state).await;
                        });
                    }
                }
            }
        });
        Self {
            host: "127.0.0.1".to_owned(),
            port,
            state,
            _shutdown: tx,
        }
    }

    /// Answers every `RCPT TO` with `reply` (e.g. `550 5.1.1 No such user`).
    pub fn reject_recipients(&self, reply: &str) {
        self.state.lock().unwrap().rcpt_reply = Some(reply.to_owned());
    }

    pub fn mails(&self) -> Vec<Mail> {
        self.state.lock().unwrap().mails.clone()
    }

    /// How many mail transactions (`MAIL FROM`) were started.
    pub fn transactions(&self) -> usize {
        self.state.lock().unwrap().transactions
    }

    /// Waits (up to 20 s) for `n` accepted mails.
    pub async fn wait_for(&self, n: usize) -> Vec<Mail> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.mails();
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "expected {n} mail(s), got {}",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn decode(b64: &str) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

async fn session(stream: TcpStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    let mut line = String::new();
    // Reads one CRLF-terminated line (without the line end); `None` at end of stream.
    macro_rules! next_line {
        () => {{
            line.clear();
            if lines.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            line.trim_end_matches(['\r', '\n']).to_owned()
        }};
    }
    write
        .write_all(b"220 localhost ESMTP test server\r\n")
        .await?;
    let mut mail = Mail::default();
    let mut auth: Option<(String, String)> = None;
    let mut helo = String::new();
    loop {
        let command = next_line!();
        let upper = command.to_ascii_uppercase();
        let reply: String = if upper.starts_with("EHLO ") {
            helo = command[5..].trim().to_owned();
            "250-localhost greets you\r\n250-8BITMIME\r\n250-AUTH PLAIN LOGIN\r\n250 SIZE 10485760"
                .to_owned()
        } else if upper.starts_with("HELO ") {
            helo = command[5..].trim().to_owned();
            "250 localhost".to_owned()
        } else if upper.starts_with("AUTH PLAIN") {
            let initial = command[10..].trim().to_owned();
            let encoded = if initial.is_empty() {
                write.write_all(b"334 \r\n").await?;
                next_line!()
            } else {
                initial
            };
            let decoded = decode(&encoded);
            let mut parts = decoded.split('\0');
            let _authzid = parts.next();
            let user = parts.next().unwrap_or_default().to_owned();
            let password = parts.next().unwrap_or_default().to_owned();
            auth = Some((user, password));
            "235 2.7.0 Authentication successful".to_owned()
        } else if upper.starts_with("AUTH LOGIN") {
            let initial = command[10..].trim().to_owned();
            let user = if initial.is_empty() {
                write.write_all(b"334 VXNlcm5hbWU6\r\n").await?;
                decode(&next_line!())
            } else {
                decode(&initial)
            };
            write.write_all(b"334 UGFzc3dvcmQ6\r\n").await?;
            let password = decode(&next_line!());
            auth = Some((user, password));
            "235 2.7.0 Authentication successful".to_owned()
        } else if upper.starts_with("MAIL FROM:") {
            state.lock().unwrap().transactions += 1;
            mail = Mail {
                helo: helo.clone(),
                auth: auth.clone(),
                from: angle(&command[10..]),
                ..Default::default()
            };
            "250 2.1.0 OK".to_owned()
        } else if upper.starts_with("RCPT TO:") {
            match state.lock().unwrap().rcpt_reply.clone() {
                Some(reply) => reply,
                None => {
                    mail.rcpt.push(angle(&command[8..]));
                    "250 2.1.5 OK".to_owned()
                }
            }
        } else if upper == "DATA" {
            if mail.rcpt.is_empty() {
                "554 5.5.1 No valid recipients".to_owned()
            } else {
                write
                    .write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")
                    .await?;
                let mut data = String::new();
                loop {
                    let l = next_line!();
                    if l == "." {
                        break;
                    }
                    data.push_str(l.strip_prefix('.').unwrap_or(&l));
                    data.push_str("\r\n");
                }
                mail.data = data;
                let mut s = state.lock().unwrap();
                s.mails.push(std::mem::take(&mut mail));
                format!("250 2.0.0 OK queued as Q{}", s.mails.len())
            }
        } else if upper == "RSET" {
            mail = Mail::default();
            "250 2.0.0 OK".to_owned()
        } else if upper == "NOOP" {
            "250 2.0.0 OK".to_owned()
        } else if upper == "QUIT" {
            write.write_all(b"221 2.0.0 Bye\r\n").await?;
            return Ok(());
        } else {
            "502 5.5.2 Command not implemented".to_owned()
        };
        write.write_all(reply.as_bytes()).await?;
        write.write_all(b"\r\n").await?;
    }
}

/// The address inside `<…>` of a MAIL FROM / RCPT TO argument (parameters after it ignored).
fn angle(arg: &str) -> String {
    let arg = arg.trim();
    match (arg.find('<'), arg.find('>')) {
        (Some(a), Some(b)) if a < b => arg[a + 1..b].to_owned(),
        _ => arg.split_whitespace().next().unwrap_or_default().to_owned(),
    }
}
