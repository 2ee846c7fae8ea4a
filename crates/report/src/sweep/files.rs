//! A sweep's files on disk: written a row at a time as cells finish, and shards checked and
//! joined back into the whole grid's files.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use serde_json::Value;

use forkcache_engine::billing::PriceTable;

use super::run::{Shard, SweepOptions, SweepResult, stream};
use super::table::{COLUMNS, CsvRows, SHARD_KEYS};
use super::{SweepError, SweepSpec};

/// What [`write()`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The rows (`sweep.csv`, or `sweep-i-of-n.csv` for a shard).
    pub csv: PathBuf,
    /// The metadata sidecar (`sweep.meta.json`, or `sweep-i-of-n.meta.json`).
    pub meta: PathBuf,
    /// Rows written: every cell of the shard.
    pub rows: usize,
    /// Cells in the whole grid.
    pub cells_total: usize,
}

/// Runs the sweep's `options.shard` into `dir` (created if missing): the metadata sidecar
/// first, then the CSV, each row flushed as soon as every cell before it is done. A sweep cut
/// short leaves a CSV holding a prefix of its rows (whole rows, in grid order); the bytes of a
/// finished one are [`SweepResult::to_csv`]'s, whatever the thread count.
pub fn write(
    dir: &Path,
    spec: &SweepSpec,
    options: &SweepOptions,
    prices: &PriceTable,
    on_cell_done: impl Fn() + Sync,
) -> Result<Written, SweepError> {
    spec.validate()?;
    let head = SweepResult::head(spec, prices, options.shard);
    let stem = options.shard.file_stem();
    let meta = dir.join(format!("{stem}.meta.json"));
    let csv = dir.join(format!("{stem}.csv"));
    let output = |path: &Path| {
        let path = path.to_path_buf();
        move |source: std::io::Error| SweepError::Output { path, source }
    };
    std::fs::create_dir_all(dir).map_err(output(dir))?;
    std::fs::write(&meta, head.meta_json(spec)).map_err(output(&meta))?;
    let file = File::create(&csv).map_err(output(&csv))?;
    let mut table = CsvRows::new(file, options.shard).map_err(|err| output(&csv)(err.into()))?;
    table.flush().map_err(output(&csv))?;
    let mut rows = 0;
    stream(spec, options, prices, on_cell_done, |row| {
        table.write(&row).map_err(|err| output(&csv)(err.into()))?;
        table.flush().map_err(output(&csv))?;
        rows += 1;
        Ok(())
    })?;
    Ok(Written { csv, meta, rows, cells_total: head.cells_total })
}

/// Why shards could not be joined.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A file or directory could not be read.
    #[error("{path}: {source}")]
    Read {
        /// What was being read.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The directory holds no shard sidecar at any depth.
    #[error("{dir}: no shard files (sweep-I-of-N.meta.json, written by `forkcache sweep --shard I/N`)")]
    NoShards {
        /// The directory searched.
        dir: PathBuf,
    },
    /// A sidecar is not a shard's metadata.
    #[error("{path}: {message}")]
    Sidecar {
        /// The sidecar.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// Two shards do not belong to one run of one sweep.
    #[error(
        "{first} and {other} are not shards of one sweep: {field} differs ({first_value} vs {other_value})"
    )]
    Mismatch {
        /// The sidecar the others are compared with.
        first: PathBuf,
        /// The one that differs.
        other: PathBuf,
        /// The metadata field that differs.
        field: String,
        /// Its value in `first`.
        first_value: String,
        /// Its value in `other`.
        other_value: String,
    },
    /// The same shard twice.
    #[error("shard {shard} is present twice: {first} and {second}")]
    Duplicate {
        /// Which shard, `i/n`.
        shard: String,
        /// One copy.
        first: PathBuf,
        /// The other.
        second: PathBuf,
    },
    /// Shards are missing.
    #[error("{dir}: missing shard{} {} of {count}", if missing.len() > 1 { "s" } else { "" }, list(missing))]
    Missing {
        /// The directory searched.
        dir: PathBuf,
        /// The missing shards' indexes (1-based).
        missing: Vec<u32>,
        /// How many shards the sweep was cut into.
        count: u32,
    },
    /// A shard's CSV is not the rows its sidecar promises.
    #[error("{path}: {message}")]
    Rows {
        /// The CSV.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}

fn list(indexes: &[u32]) -> String {
    indexes.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// Shards joined: the whole grid's files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    /// `sweep.csv`: the shards' CSVs, concatenated in shard order.
    pub csv: Vec<u8>,
    /// `sweep.meta.json`: a shard's sidecar without what is particular to shards.
    pub meta: String,
    /// How many shards were joined.
    pub shards: u32,
    /// Rows in `csv`: every cell of the grid.
    pub rows: usize,
}

/// One shard found on disk.
struct Found {
    shard: Shard,
    meta_path: PathBuf,
    meta: serde_json::Map<String, Value>,
}

/// Finds every shard under `dir` (at any depth: each scheduler task may write its own
/// directory), checks that they are shards of one sweep run by one version of forkcache, each
/// present exactly once, and complete (each CSV holds exactly its cells, in order), then joins
/// them byte for byte. The result equals an unsharded run's files.
#[allow(clippy::expect_used)] // the metadata is plain data: serializing it cannot fail
pub fn merge_shards(dir: &Path) -> Result<Merged, MergeError> {
    let mut sidecars = Vec::new();
    find_sidecars(dir, &mut sidecars)?;
    let found = sidecars.into_iter().map(read_sidecar).collect::<Result<Vec<_>, _>>()?;
    let Some(first) = found.first() else {
        return Err(MergeError::NoShards { dir: dir.to_path_buf() });
    };
    for other in &found[1..] {
        check_same_sweep(first, other)?;
    }
    let shards = one_of_each(dir, &found)?;
    let cells = first.meta.get("cells").and_then(Value::as_u64).ok_or_else(|| MergeError::Sidecar {
        path: first.meta_path.clone(),
        message: "no `cells` count".into(),
    })? as usize;
    let mut csv = Vec::new();
    for found in &shards {
        let path = found.meta_path.with_file_name(format!("{}.csv", found.shard.file_stem()));
        let bytes = std::fs::read(&path).map_err(|source| MergeError::Read { path: path.clone(), source })?;
        check_rows(&path, &bytes, found.shard, cells)?;
        csv.extend_from_slice(&bytes);
    }
    let mut meta = first.meta.clone();
    for key in SHARD_KEYS {
        meta.shift_remove(key);
    }
    let meta = serde_json::to_string_pretty(&meta).expect("the metadata serializes") + "\n";
    Ok(Merged { csv, meta, shards: first.shard.count, rows: cells })
}

/// Every `sweep-I-of-N.meta.json` under `dir`, in path order.
fn find_sidecars(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), MergeError> {
    let read_error = |source| MergeError::Read { path: dir.to_path_buf(), source };
    let mut entries = std::fs::read_dir(dir)
        .map_err(read_error)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(read_error)?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            find_sidecars(&path, out)?;
        } else if sidecar_shard(&path).is_some() {
            out.push(path);
        }
    }
    Ok(())
}

/// The shard a sidecar's name says it holds.
fn sidecar_shard(path: &Path) -> Option<Shard> {
    let name = path.file_name()?.to_str()?;
    Shard::from_file_stem(name.strip_suffix(".meta.json")?)
}

fn read_sidecar(meta_path: PathBuf) -> Result<Found, MergeError> {
    let invalid = |message: String| MergeError::Sidecar { path: meta_path.clone(), message };
    let text = std::fs::read_to_string(&meta_path)
        .map_err(|source| MergeError::Read { path: meta_path.clone(), source })?;
    let Ok(Value::Object(meta)) = serde_json::from_str::<Value>(&text) else {
        return Err(invalid("not a JSON object".into()));
    };
    for key in SHARD_KEYS {
        if !meta.contains_key(key) {
            return Err(invalid(format!(
                "no `{key}` field (written by an older forkcache? rerun the shard)"
            )));
        }
    }
    let number =
        |field: &str| meta["shard"].get(field).and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
    let (Some(index), Some(count)) = (number("index"), number("count")) else {
        return Err(invalid("`shard` is not {\"index\": i, \"count\": n}".into()));
    };
    let shard = Shard { index, count };
    if sidecar_shard(&meta_path) != Some(shard) {
        return Err(invalid(format!("its name does not match the shard it holds, {index}/{count}")));
    }
    Ok(Found { shard, meta_path, meta })
}

/// Same grid cut the same way, by the same version, from the same sweep; every other field
/// (price date, seed, the spec itself) equal too.
fn check_same_sweep(first: &Found, other: &Found) -> Result<(), MergeError> {
    let mismatch = |field: &str, a: String, b: String| MergeError::Mismatch {
        first: first.meta_path.clone(),
        other: other.meta_path.clone(),
        field: field.into(),
        first_value: a,
        other_value: b,
    };
    if first.shard.count != other.shard.count {
        return Err(mismatch("shard count", first.shard.count.to_string(), other.shard.count.to_string()));
    }
    let keys = SHARD_KEYS[1..].iter().copied().chain(first.meta.keys().map(String::as_str));
    for key in keys.chain(other.meta.keys().map(String::as_str)) {
        if key == SHARD_KEYS[0] {
            continue;
        }
        let (a, b) = (first.meta.get(key), other.meta.get(key));
        if a != b {
            let show = |v: Option<&Value>| v.map_or("absent".into(), |v| abbreviate(&v.to_string()));
            return Err(mismatch(key, show(a), show(b)));
        }
    }
    Ok(())
}

/// A value short enough for an error message.
fn abbreviate(text: &str) -> String {
    const LIMIT: usize = 80;
    match text.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// The shards in order, each exactly once.
fn one_of_each<'f>(dir: &Path, found: &'f [Found]) -> Result<Vec<&'f Found>, MergeError> {
    let mut by_index: BTreeMap<u32, &Found> = BTreeMap::new();
    for shard in found {
        if let Some(earlier) = by_index.insert(shard.shard.index, shard) {
            return Err(MergeError::Duplicate {
                shard: format!("{}/{}", shard.shard.index, shard.shard.count),
                first: earlier.meta_path.clone(),
                second: shard.meta_path.clone(),
            });
        }
    }
    let count = found[0].shard.count;
    let missing: Vec<u32> = (1..=count).filter(|i| !by_index.contains_key(i)).collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing { dir: dir.to_path_buf(), missing, count });
    }
    Ok(by_index.into_values().collect())
}

/// A shard's CSV holds the header (first shard only), then exactly its cells, in order.
fn check_rows(path: &Path, bytes: &[u8], shard: Shard, cells: usize) -> Result<(), MergeError> {
    let wrong = |message: String| MergeError::Rows { path: path.to_path_buf(), message };
    let mut reader = csv::ReaderBuilder::new().has_headers(false).from_reader(bytes);
    let mut records = reader.records();
    if shard.is_first() {
        let header = records.next().transpose().map_err(|err| wrong(err.to_string()))?;
        if !header.is_some_and(|h| h.iter().eq(COLUMNS)) {
            return Err(wrong("the first line is not the sweep CSV's header".into()));
        }
    }
    let expected = shard.range(cells);
    let mut rows = 0;
    let Shard { index, count } = shard;
    for record in records {
        let record =
            record.map_err(|err| wrong(format!("{err} (cut short? rerun shard {index}/{count})")))?;
        let cell = expected.start + rows;
        if cell == expected.end {
            return Err(wrong(format!("more rows than its {} cells", expected.len())));
        }
        if record.get(0) != Some(cell.to_string().as_str()) {
            let found = record.get(0).unwrap_or("");
            return Err(wrong(format!("row {} is cell {found:?}; expected cell {cell}", rows + 1)));
        }
        rows += 1;
    }
    if rows < expected.len() {
        return Err(wrong(format!(
            "{rows} of its {} rows (cut short? rerun shard {index}/{count})",
            expected.len()
        )));
    }
    if !bytes.is_empty() && !bytes.ends_with(b"\n") {
        return Err(wrong("its last line is unfinished".into()));
    }
    Ok(())
}
