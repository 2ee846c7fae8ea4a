//! `import codex` throughput on the 13 real rollouts of `../shared/corpus/codex` (19.3 MB; the
//! bench says so and exits when the folder is absent): reading alone, and the whole import
//! (read, prices, breaks, prediction, one what-if). See benches/README.md.

use std::time::Duration;

use criterion::{Criterion, Throughput};

use forkcache_engine::PriceTable;
use forkcache_ingest::codex::{self, CodexOptions, CodexWhatIf};

const CORPUS: &str = "../shared/corpus/codex";

fn files() -> Option<Vec<(String, Vec<u8>)>> {
    let mut paths: Vec<_> = std::fs::read_dir(CORPUS)
        .ok()?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    paths.sort();
    paths.into_iter().map(|path| Some((path.display().to_string(), std::fs::read(&path).ok()?))).collect()
}

fn read(files: &[(String, Vec<u8>)]) -> Vec<codex::CodexThread> {
    files.iter().map(|(name, bytes)| codex::read_rollout(name, bytes).expect("a corpus file reads")).collect()
}

fn main() {
    let Some(files) = files() else {
        eprintln!("import_codex: SKIPPED: {CORPUS} is absent");
        return;
    };
    let bytes: usize = files.iter().map(|(_, text)| text.len()).sum();
    let prices = PriceTable::builtin_openai();
    let options = CodexOptions { what_ifs: vec![CodexWhatIf::Retention24h], ..CodexOptions::default() };
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("import_codex");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("read", |b| b.iter(|| read(&files)));
    group.bench_function("read_and_analyse", |b| b.iter(|| codex::analyse(&read(&files), &options, &prices)));
    group.finish();
    criterion.final_summary();
}
