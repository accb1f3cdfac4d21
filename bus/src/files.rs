//! Private files of the embedded mode: the data dir is created 0700 and every file the bus keeps
//! in it (the event log, the read models, their WAL and shared-memory files, the admin token) is
//! 0600, because they hold every payload, token hash and identity of every tenant.
//!
//! Deliberately never loosens anything and never changes a directory it did not create: an
//! existing data dir open to others is reported with the fix (an operator may share its parent
//! on purpose), while the bus's own files are tightened, since nobody else should read them.

use std::io;
use std::path::Path;

/// Mode of the files the bus creates.
pub const FILE_MODE: u32 = 0o600;
/// Mode of a data dir the bus creates.
pub const DIR_MODE: u32 = 0o700;

/// Creates `dir` (and missing parents) with mode 0700; an existing one that group or others may
/// enter is left as it is, with a warning naming the fix.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        if let Ok(meta) = std::fs::metadata(dir) {
            let mode = meta.permissions().mode() & 0o777;
            if meta.is_dir() && mode & 0o077 != 0 {
                tracing::warn!(
                    dir = %dir.display(),
                    mode = format!("{mode:o}"),
                    "the data dir is open to group or others; its files are 0600, but run `chmod 700` on it"
                );
            }
        }
        std::fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// Makes `path` a private file before anything else opens it: created empty with mode 0600 when
/// missing (SQLite then gives its `-wal` and `-shm` files the same mode), tightened to 0600 when
/// it exists with more. The `-wal` and `-shm` files of an existing database are tightened too.
pub fn private_file(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(FILE_MODE).open(path) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => tighten(path)?,
            Err(e) => return Err(e),
        }
        for suffix in ["-wal", "-shm"] {
            let mut side = path.as_os_str().to_owned();
            side.push(suffix);
            match tighten(Path::new(&side)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

/// Sets an existing file of the bus to 0600 if group or others had any access.
#[cfg(unix)]
fn tighten(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(FILE_MODE))?;
        tracing::info!(path = %path.display(), was = format!("{mode:o}"), "tightened a data file to 0600");
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn new_dirs_are_0700_and_new_files_0600() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/data");
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let file = dir.join("events.sqlite");
        private_file(&file).unwrap();
        assert_eq!(mode(&file), 0o600);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 0);
    }

    #[test]
    fn existing_files_of_the_bus_are_tightened_and_never_truncated() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("readmodels.sqlite");
        let wal = tmp.path().join("readmodels.sqlite-wal");
        for p in [&file, &wal] {
            std::fs::write(p, b"data").unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        private_file(&file).unwrap();
        assert_eq!((mode(&file), mode(&wal)), (0o600, 0o600));
        assert_eq!(std::fs::read(&file).unwrap(), b"data");
    }

    #[test]
    fn an_existing_open_dir_is_left_as_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(tmp.path()).unwrap();
        assert_eq!(mode(tmp.path()), 0o755);
    }
}
