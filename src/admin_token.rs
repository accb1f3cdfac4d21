//! The admin token: given by flag or environment, or generated once, printed once, and kept in
//! `<data-dir>/admin_token` (mode 0600) so restarts and local CLI calls find it.
//!
//! Deliberately does not authenticate anything: the gateway compares tokens.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

pub const FILE_NAME: &str = "admin_token";

pub fn path_in(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

/// The admin token to use: `given`, else the one kept in `data_dir`, else a new one.
pub fn resolve(given: Option<String>, data_dir: &Path) -> anyhow::Result<String> {
    if let Some(t) = given.filter(|t| !t.is_empty()) {
        return Ok(t);
    }
    let path = path_in(data_dir);
    if let Ok(t) = std::fs::read_to_string(&path) {
        let t = t.trim().to_string();
        if !t.is_empty() {
            // A copy put there by hand may be readable by others; it is a secret, like the files.
            bus::files::private_file(&path).with_context(|| format!("cannot make {} private", path.display()))?;
            return Ok(t);
        }
    }
    let token = format!("sba_{}", random_hex(32));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, bus::files::FILE_MODE);
    let mut f = options.open(&path).with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(token.as_bytes())?;
    // Printed once, on purpose: this is the only time the operator sees it outside the file.
    println!("admin token (kept in {}): {token}", path.display());
    Ok(token)
}

fn random_hex(bytes: usize) -> String {
    use std::fmt::Write as _;
    let mut buf = vec![0u8; bytes];
    getrandom(&mut buf);
    buf.iter().fold(String::with_capacity(bytes * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn getrandom(buf: &mut [u8]) {
    use rand::RngCore;
    rand::rngs::OsRng.fill_bytes(buf);
}
