//! Reports: charts (PNG and SVG), CSV tables and the files that hold them.
//!
//! A report is a list of [`Artifact`]s (file name and bytes); [`write`] puts them in a directory.

pub mod chart;
pub(crate) mod format;

use std::path::{Path, PathBuf};

use crate::sweep::{SweepResult, SweepSpec};

/// One file of a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    /// File name, relative to the report directory.
    pub name: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl Artifact {
    fn new(name: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Artifact {
        Artifact { name: name.into(), bytes: bytes.into() }
    }
}

/// Writes `artifacts` into `dir` (created if missing); returns the paths written.
pub fn write(dir: &Path, artifacts: &[Artifact]) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    artifacts
        .iter()
        .map(|artifact| {
            let path = dir.join(&artifact.name);
            std::fs::write(&path, &artifact.bytes)?;
            Ok(path)
        })
        .collect()
}

/// A sweep's files: `sweep.csv` (a shard: `sweep-i-of-n.csv`, `i` zero-padded so the names
/// sort in order) and `sweep.meta.json`.
pub fn sweep_artifacts(spec: &SweepSpec, result: &SweepResult) -> Vec<Artifact> {
    let shard = result.shard;
    let csv_name = if shard.count == 1 {
        "sweep.csv".to_string()
    } else {
        let width = shard.count.to_string().len();
        format!("sweep-{:0width$}-of-{}.csv", shard.index, shard.count)
    };
    vec![Artifact::new(csv_name, result.to_csv()), Artifact::new("sweep.meta.json", result.meta_json(spec))]
}

/// Writes a sweep's files into `dir`.
pub fn write_sweep(dir: &Path, spec: &SweepSpec, result: &SweepResult) -> std::io::Result<Vec<PathBuf>> {
    write(dir, &sweep_artifacts(spec, result))
}
