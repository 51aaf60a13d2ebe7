//! Drives a [`TestApp`] with the official Novu SDKs: the Python scripts in `tests/sdk/` run in a venv
//! (`TIDINGS_TEST_PYTHON`, else `.venv/` in the repository, created with `tests/sdk/requirements.txt`); the
//! JavaScript scripts in `tests/sdk-ts/` run with `node` against `@novu/api` (and the Inbox client `@novu/js`)
//! as pinned by `tests/sdk-ts/package-lock.json` (installed with `npm ci` when `node_modules` lacks a pinned package).
//!
//! The v1 preference routes are driven by the last releases that have methods for them: `@novu/api-legacy`
//! (an npm alias in the same lockfile) and the older `novu-py` of `tests/sdk/requirements-legacy.txt`, which
//! shares its package name with the current one and so is installed with `pip install --target` into
//! `tests/sdk/.legacy/` (see [`legacy_python_packages`]); the scripts that use it put that folder first on
//! their path.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use super::TestApp;

static VENV: Mutex<Option<PathBuf>> = Mutex::new(None);
static NODE_MODULES: Mutex<bool> = Mutex::new(false);
static LEGACY: Mutex<bool> = Mutex::new(false);

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
    // The marker holds the requirements it was installed from: a changed pin installs again.
    let ready = venv.join(".tidings-sdk-ready");
    let requirements = repo_root().join("tests/sdk/requirements.txt");
    let stamp = std::fs::read_to_string(&requirements).unwrap();
    let installed = std::fs::read_to_string(&ready).ok();
    if installed.as_deref() != Some(stamp.as_str()) {
        if !py.exists() {
            run(Command::new("python3").arg("-m").arg("venv").arg(&venv));
        }
        run(Command::new(&py)
            .args(["-m", "pip", "install", "--quiet", "-r"])
            .arg(&requirements));
        std::fs::write(&ready, stamp).unwrap();
    }
    *guard = Some(py.clone());
    py
}

/// Makes sure `tests/sdk/.legacy/` holds the packages of `tests/sdk/requirements-legacy.txt`, installed by
/// [`python`]'s interpreter; again (from scratch) when the pins or the interpreter changed since.
pub fn legacy_python_packages() {
    let mut ready = LEGACY.lock().unwrap_or_else(|p| p.into_inner());
    if *ready {
        return;
    }
    let py = python();
    let requirements = repo_root().join("tests/sdk/requirements-legacy.txt");
    let dir = repo_root().join("tests/sdk/.legacy");
    let marker = dir.join(".tidings-sdk-ready");
    let stamp = format!(
        "{}{}\n",
        std::fs::read_to_string(&requirements).unwrap(),
        py.display()
    );
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(stamp.as_str()) {
        if dir.exists() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
        run(Command::new(&py)
            .args(["-m", "pip", "install", "--quiet", "--target"])
            .arg(&dir)
            .arg("-r")
            .arg(&requirements));
        std::fs::write(&marker, stamp).unwrap();
    }
    *ready = true;
}

/// Makes sure `tests/sdk-ts/node_modules` holds every package `tests/sdk-ts/package.json` pins (`@novu/api`,
/// `@novu/api-legacy`, `@novu/js` the Inbox client, `svix` and `standardwebhooks`): `npm ci` once when one is
/// missing.
pub fn node_modules() {
    let mut ready = NODE_MODULES.lock().unwrap_or_else(|p| p.into_inner());
    if *ready {
        return;
    }
    let dir = repo_root().join("tests/sdk-ts");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap()).unwrap();
    let installed = manifest["dependencies"]
        .as_object()
        .expect("tests/sdk-ts/package.json has dependencies")
        .keys()
        .all(|p| dir.join(format!("node_modules/{p}/package.json")).exists());
    if !installed {
        run(Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir));
    }
    *ready = true;
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

/// Runs `program path` with the app's address and key (`TIDINGS_URL`, `TIDINGS_KEY`) and `env`; a failure
/// answers the script's output.
async fn run_with(
    app: &TestApp,
    program: PathBuf,
    path: PathBuf,
    env: &[(&str, String)],
) -> Result<(), String> {
    let url = app.base.clone();
    let key = app.key.clone();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let shown = path.display().to_string();
    let out: Output = tokio::task::spawn_blocking(move || {
        Command::new(&program)
            .arg(Path::new(&path))
            .env("TIDINGS_URL", url)
            .env("TIDINGS_KEY", key)
            .env("PYTHONUNBUFFERED", "1")
            .envs(env)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", program.display()))
    })
    .await
    .unwrap();
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "SDK script {shown} failed:\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Runs `tests/sdk/<script>` against `app` (which should use the `novu` profile); panics with the
/// script's output when it fails.
pub async fn run_script(app: &TestApp, script: &str) {
    if let Err(e) = run_python(app, script, &[]).await {
        panic!("{e}");
    }
}

/// Runs `tests/sdk/<script>` with `env` besides the app's address and key; a failure answers its output.
pub async fn run_python(app: &TestApp, script: &str, env: &[(&str, String)]) -> Result<(), String> {
    let py = tokio::task::spawn_blocking(python).await.unwrap();
    let path = repo_root().join("tests/sdk").join(script);
    run_with(app, py, path, env).await
}

/// Runs `tests/sdk/<script>`, a script of the older `novu-py` (installed first, see
/// [`legacy_python_packages`]), like [`run_python`].
pub async fn run_python_legacy(
    app: &TestApp,
    script: &str,
    env: &[(&str, String)],
) -> Result<(), String> {
    tokio::task::spawn_blocking(legacy_python_packages)
        .await
        .unwrap();
    run_python(app, script, env).await
}

/// Runs `tests/sdk-ts/<script>` with `node` and `env` besides the app's address and key; a failure
/// answers its output.
pub async fn run_node(app: &TestApp, script: &str, env: &[(&str, String)]) -> Result<(), String> {
    tokio::task::spawn_blocking(node_modules).await.unwrap();
    let path = repo_root().join("tests/sdk-ts").join(script);
    run_with(app, PathBuf::from("node"), path, env).await
}
