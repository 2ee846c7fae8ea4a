//! Sweeps written as cells finish (issue 14): rows reach the file in grid order whatever the
//! thread count, an interrupted sweep keeps whole rows, and `merge-shards` joins shards only when
//! each is present once, from one sweep and one version, with every row.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use forkcache_engine::PriceTable;
use forkcache_report::sweep::{
    MergeError, Shard, SweepError, SweepOptions, SweepSpec, merge_shards, run, stream, write,
};

use super::sweep_grid::{SMALL, small_csv};

fn small() -> SweepSpec {
    SweepSpec::from_json(SMALL).unwrap()
}

/// A fresh directory under the test target dir.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn rows_reach_the_sink_in_grid_order_on_any_thread_count() {
    for threads in [1, 2, 4] {
        let mut seen = Vec::new();
        let options = SweepOptions { threads: Some(threads), shard: Shard::WHOLE };
        stream(
            &small(),
            &options,
            &PriceTable::builtin(),
            || {},
            |row| {
                seen.push(row.cell.index);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen, (0..72).collect::<Vec<_>>(), "{threads} threads");
    }
}

/// Streams the small grid into a sink that refuses the 11th row; returns the error, the rows
/// taken and how many cells ran.
fn refuse_eleventh_row(threads: usize) -> (String, Vec<usize>, usize) {
    let done = AtomicUsize::new(0);
    let mut seen = Vec::new();
    let options = SweepOptions { threads: Some(threads), shard: Shard::WHOLE };
    let on_cell_done = || {
        done.fetch_add(1, Ordering::Relaxed);
    };
    let outcome = stream(&small(), &options, &PriceTable::builtin(), on_cell_done, |row| {
        if seen.len() == 10 {
            let source = std::io::Error::other("disk full");
            return Err(SweepError::Output { path: "sweep.csv".into(), source });
        }
        seen.push(row.cell.index);
        Ok(())
    });
    (outcome.unwrap_err().to_string(), seen, done.load(Ordering::Relaxed))
}

#[test]
fn a_failing_sink_stops_the_sweep_after_the_rows_it_took() {
    // One worker takes cells strictly in order: the 11th cell ran, its row was refused, and no
    // cell was taken after it.
    let (error, seen, done) = refuse_eleventh_row(1);
    assert_eq!(error, "sweep.csv: disk full");
    assert_eq!(seen, (0..10).collect::<Vec<_>>());
    assert_eq!(done, 11);
    // With two, the other worker may have finished cells past it, but the sink saw the same.
    let (error, seen, _) = refuse_eleventh_row(2);
    assert_eq!(error, "sweep.csv: disk full");
    assert_eq!(seen, (0..10).collect::<Vec<_>>());
}

#[test]
fn written_files_are_the_in_memory_bytes_on_any_thread_count() {
    let spec = small();
    let prices = PriceTable::builtin();
    for threads in [1, 3] {
        let dir = scratch(&format!("sweep-write-{threads}"));
        let options = SweepOptions { threads: Some(threads), shard: Shard::WHOLE };
        let written = write(&dir, &spec, &options, &prices, || {}).unwrap();
        assert_eq!((written.rows, written.cells_total), (72, 72));
        assert_eq!(std::fs::read_to_string(&written.csv).unwrap(), small_csv(SweepOptions::default()));
        let result = run(&spec, &SweepOptions::default(), &prices, || {}).unwrap();
        assert_eq!(std::fs::read_to_string(&written.meta).unwrap(), result.meta_json(&spec));
    }
}

/// `forkcache ARGS…` with progress bars off.
fn forkcache(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .args(args)
        .env("CI", "true")
        .output()
        .expect("the binary runs")
}

/// The small grid's settings with `history_tokens` first in `histories`: its first block of
/// rows (the slowest axis) is the same cells as the small grid at that one history.
fn with_histories(histories: &[u64], forks: &[u64]) -> String {
    let mut spec: serde_json::Value = serde_json::from_str(SMALL).unwrap();
    spec["grid"]["history_tokens"] = serde_json::json!(histories);
    spec["grid"]["forks"] = serde_json::json!(forks);
    spec.to_string()
}

#[test]
fn an_interrupted_sweep_keeps_whole_rows_in_grid_order() {
    let dir = scratch("sweep-interrupted");
    // 12 histories × 8 fork counts × 12 settings × 2 gaps: 2,304 cells, seconds of work on one
    // thread; it is killed once three rows are on disk.
    let histories: Vec<u64> = (1..=12).map(|i| i * 10_000).collect();
    let forks: Vec<u64> = (1..=8).collect();
    let big = dir.join("big.json");
    std::fs::write(&big, with_histories(&histories, &forks)).unwrap();
    let out = dir.join("out");
    let mut child = Command::new(env!("CARGO_BIN_EXE_forkcache"))
        .arg("sweep")
        .arg(&big)
        .arg("--out")
        .arg(&out)
        .args(["--threads", "1"])
        .env("CI", "true")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let csv = out.join("sweep.csv");
    let lines = || std::fs::read_to_string(&csv).map_or(0, |text| text.lines().count());
    while lines() < 4 {
        assert!(child.try_wait().unwrap().is_none(), "the sweep ended before it could be interrupted");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let partial = std::fs::read_to_string(&csv).unwrap();
    assert!(partial.ends_with('\n'), "only whole rows: {partial:?}");
    let rows = partial.lines().count() - 1;
    assert!((3..2_304).contains(&rows), "{rows} rows");
    // The first history's cells, run whole and in memory: the partial file agrees with them.
    let first = SweepSpec::from_json(&with_histories(&histories[..1], &forks)).unwrap();
    let expected = run(&first, &SweepOptions::default(), &PriceTable::builtin(), || {}).unwrap().to_csv();
    assert!(
        expected.starts_with(&partial) || partial.starts_with(&expected),
        "the kept rows are the grid's first rows, byte for byte"
    );
}

/// Runs shard `i` of `n` of the small grid into `dir/i`.
fn shard_into(dir: &Path, spec: &SweepSpec, index: u32, count: u32) -> PathBuf {
    let options = SweepOptions { threads: Some(2), shard: Shard { index, count } };
    write(&dir.join(index.to_string()), spec, &options, &PriceTable::builtin(), || {}).unwrap().csv
}

fn all_shards(name: &str, count: u32) -> PathBuf {
    let dir = scratch(name);
    for index in 1..=count {
        shard_into(&dir, &small(), index, count);
    }
    dir
}

#[test]
fn merged_shards_are_the_whole_run_byte_for_byte() {
    let dir = all_shards("merge-ok", 4);
    let merged = merge_shards(&dir).unwrap();
    assert_eq!((merged.shards, merged.rows), (4, 72));
    assert_eq!(String::from_utf8(merged.csv).unwrap(), small_csv(SweepOptions::default()));
    let whole = run(&small(), &SweepOptions::default(), &PriceTable::builtin(), || {}).unwrap();
    assert_eq!(merged.meta, whole.meta_json(&small()));
}

#[test]
fn the_command_merges_and_says_what_is_wrong() {
    let dir = all_shards("merge-cli", 3);
    let out = dir.join("merged");
    let output = forkcache(&["merge-shards".as_ref(), dir.as_os_str(), "--out".as_ref(), out.as_os_str()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(std::fs::read_to_string(out.join("sweep.csv")).unwrap(), small_csv(SweepOptions::default()));
    std::fs::remove_dir_all(dir.join("2")).unwrap();
    let output = forkcache(&["merge-shards".as_ref(), dir.as_os_str()]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("missing shard 2 of 3"), "{stderr}");
}

fn merge_error(dir: &Path) -> String {
    match merge_shards(dir) {
        Ok(_) => panic!("{} merged", dir.display()),
        Err(err) => err.to_string(),
    }
}

#[test]
fn a_missing_shard_is_named() {
    let dir = all_shards("merge-missing", 4);
    std::fs::remove_dir_all(dir.join("2")).unwrap();
    std::fs::remove_dir_all(dir.join("4")).unwrap();
    assert!(
        matches!(merge_shards(&dir), Err(MergeError::Missing { ref missing, count: 4, .. }) if missing == &[2, 4])
    );
    assert!(merge_error(&dir).ends_with("missing shards 2, 4 of 4"));
}

#[test]
fn a_shard_present_twice_is_named() {
    let dir = all_shards("merge-twice", 2);
    shard_into(&dir.join("retry"), &small(), 2, 2);
    let message = merge_error(&dir);
    assert!(message.starts_with("shard 2/2 is present twice: "), "{message}");
    assert!(message.contains("retry"), "{message}");
}

#[test]
fn shards_of_another_sweep_or_cut_are_refused() {
    let dir = all_shards("merge-other-sweep", 2);
    let mut other = small();
    other.scenario.seed = 6;
    std::fs::remove_dir_all(dir.join("2")).unwrap();
    shard_into(&dir, &other, 2, 2);
    let message = merge_error(&dir);
    assert!(message.contains("are not shards of one sweep: "), "{message}");

    let dir = all_shards("merge-other-cut", 2);
    shard_into(&dir.join("x"), &small(), 3, 3);
    assert!(merge_error(&dir).contains("shard count differs (2 vs 3)"), "{}", merge_error(&dir));
}

#[test]
fn shards_from_another_version_are_refused() {
    let dir = all_shards("merge-version", 2);
    let sidecar = dir.join("2/sweep-2-of-2.meta.json");
    let text = std::fs::read_to_string(&sidecar).unwrap();
    let version = format!("\"forkcache_version\": \"{}\"", env!("CARGO_PKG_VERSION"));
    assert!(text.contains(&version));
    std::fs::write(&sidecar, text.replace(&version, "\"forkcache_version\": \"0.0.1\"")).unwrap();
    let message = merge_error(&dir);
    assert!(
        message.ends_with(&format!(
            "forkcache_version differs (\"{}\" vs \"0.0.1\")",
            env!("CARGO_PKG_VERSION")
        )),
        "{message}"
    );
}

#[test]
fn a_cut_short_shard_is_refused() {
    let dir = all_shards("merge-cut-short", 2);
    let csv = dir.join("2/sweep-2-of-2.csv");
    let text = std::fs::read_to_string(&csv).unwrap();
    // Shard 2 of 2 holds cells 36..72; keep the first 20 rows.
    let kept: String = text.split_inclusive('\n').take(20).collect();
    std::fs::write(&csv, kept).unwrap();
    assert!(
        merge_error(&dir).ends_with("20 of its 36 rows (cut short? rerun shard 2/2)"),
        "{}",
        merge_error(&dir)
    );
    // A row cut mid-line is refused too.
    std::fs::write(&csv, &text[..text.len() - 5]).unwrap();
    assert!(merge_error(&dir).contains("sweep-2-of-2.csv: "), "{}", merge_error(&dir));
}

#[test]
fn an_empty_directory_has_no_shards() {
    let dir = scratch("merge-empty");
    assert!(
        merge_error(&dir)
            .ends_with("no shard files (sweep-I-of-N.meta.json, written by `forkcache sweep --shard I/N`)")
    );
}
