//! No silent drops, no small lies (issue 35, item 4): what the server says at start-up, fields the
//! API accepts but does not implement refused with a 422 naming them, every shape of a message with
//! the same fields, and filters that are honoured rather than ignored.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// `tidings serve` on a fresh SQLite folder: the banner names the active wire profile and says
/// when to choose `novu`; the warning about an `http` public address is a whole sentence.
#[test]
fn the_start_up_banner_names_the_profile() {
    for (profile, args) in [("spec", &[][..]), ("novu", &["--compat", "novu"][..])] {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_tidings"))
            .arg("serve")
            .args(args)
            .current_dir(dir.path())
            .env("TIDINGS_LISTEN", "127.0.0.1:0")
            .env("TIDINGS_PUBLIC_URL", "http://notify.example.com")
            .env("RUST_LOG", "warn")
            .env_remove("TIDINGS_COMPAT")
            .env_remove("TIDINGS_API_KEY")
            .env_remove("DATABASE_URL")
            .env_remove("TIDINGS_ENCRYPTION_KEY")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tidings serve");
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut lines = Vec::new();
        while let Ok(line) = rx.recv_timeout(Duration::from_secs(60)) {
            let done = line.starts_with("Choose ");
            lines.push(line);
            if done {
                break;
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        let mut err = String::new();
        stderr.read_to_string(&mut err).unwrap();

        let serving = lines
            .iter()
            .find(|l| l.starts_with("Serving the API on http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("no banner: {lines:?} {err}"));
        assert!(
            serving.ends_with(&format!(
                " with the wire profile \"{profile}\" (--compat / TIDINGS_COMPAT)."
            )),
            "{serving}"
        );
        assert_eq!(
            lines.last().map(String::as_str),
            Some(
                "Choose \"novu\" when Novu's SDKs (novu-py, @novu/api) call this server: they expect \
                 identifiers spelled novu… and bodies inside {\"data\": …}; \"spec\" follows the \
                 specification literally."
            )
        );
        assert!(
            err.contains(
                "TIDINGS_PUBLIC_URL is not https: mail providers ignore one-click unsubscribe links \
                 that are not https, so emails will carry links no mail client offers"
            ),
            "{err}"
        );
    }
}
