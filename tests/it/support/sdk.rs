//! Drives a [`TestApp`] with the official Novu Python SDK: the scripts in `tests/sdk/` run in a venv
//! (`TIDINGS_TEST_PYTHON`, else `.venv/` in the repository, created with `tests/sdk/requirements.txt`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use super::TestApp;

static VENV: Mutex<Option<PathBuf>> = Mutex::new(None);

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python interpreter that has `novu-py` installed.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("TIDINGS_TEST_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let mut guard = VENV.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = guard.as_ref() {
        return p.clone();
    }
    let venv = repo_root().join(".venv");
    let py = venv.join("bin").join("python");
    let ready = venv.join(".tidings-sdk-ready");
    if !ready.exists() {
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv));
        run(Command::new(&py)
            .args(["-m", "pip", "install", "--quiet", "-r"])
            .arg(repo_root().join("tests/sdk/requirements.txt")));
        std::fs::write(&ready, "ok").unwrap();
    }
    *guard = Some(py.clone());
    py
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `tests/sdk/<script>` against `app` (which should use the `novu` profile); panics with the
/// script's output when it fails.
pub async fn run_script(app: &TestApp, script: &str) {
    let py = tokio::task::spawn_blocking(python).await.unwrap();
    let path: PathBuf = repo_root().join("tests/sdk").join(script);
    let url = app.base.clone();
    let key = app.key.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(&py)
            .arg(Path::new(&path))
            .env("TIDINGS_URL", url)
            .env("TIDINGS_KEY", key)
            .env("PYTHONUNBUFFERED", "1")
            .output()
            .expect("run python")
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "SDK script {script} failed:\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
