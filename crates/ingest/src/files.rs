//! Which files an import reads: a session file, a sub-agent file, a session directory (its
//! `subagents/`), or a project directory (every session and sub-agent file below it).

use std::path::{Path, PathBuf};

/// Every `.jsonl` file at or below each path, each path's files sorted, duplicates dropped.
pub fn transcript_files(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        let mut found = Vec::new();
        collect(path, &mut found)?;
        found.sort();
        files.extend(found);
    }
    let mut seen = std::collections::BTreeSet::new();
    files.retain(|file| seen.insert(file.clone()));
    Ok(files)
}

fn collect(path: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if !path.is_dir() {
        // A named file is read whatever its extension; a missing one is an error.
        std::fs::metadata(path).map_err(|e| naming(path, e))?;
        found.push(path.to_path_buf());
        return Ok(());
    }
    for entry in std::fs::read_dir(path).map_err(|e| naming(path, e))? {
        let entry = entry.map_err(|e| naming(path, e))?.path();
        if entry.is_dir() {
            collect(&entry, found)?;
        } else if entry.extension().is_some_and(|ext| ext == "jsonl") {
            found.push(entry);
        }
    }
    Ok(())
}

/// The I/O error with the path it concerns (the OS's message names none).
fn naming(path: &Path, error: std::io::Error) -> std::io::Error {
    std::io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}
