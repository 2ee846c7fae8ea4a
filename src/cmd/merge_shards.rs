//! `forkcache merge-shards`: a sweep's shards checked and joined.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::files_json;
use crate::flags::{JsonFlag, QuietFlag};

/// `merge-shards`.
#[derive(Args, Debug)]
pub struct MergeShardsArgs {
    /// Directory holding the shards' files (sweep-I-of-N.csv and .meta.json), in any
    /// subdirectories.
    pub dir: PathBuf,
    /// Directory sweep.csv and sweep.meta.json are written to. Default: DIR.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub output: JsonFlag,
    #[command(flatten)]
    pub quiet: QuietFlag,
}

pub fn run(args: &MergeShardsArgs) -> anyhow::Result<ExitCode> {
    // The shards are the user's input: a missing, duplicated or foreign one is exit 1.
    let merged = match forkcache_report::sweep::merge_shards(&args.dir) {
        Ok(merged) => merged,
        Err(err) => {
            eprintln!("forkcache: merge-shards: {err}");
            return Ok(ExitCode::from(1));
        }
    };
    let out = args.out.as_deref().unwrap_or(&args.dir);
    let artifacts = [
        forkcache_report::Artifact { name: "sweep.csv".into(), bytes: merged.csv },
        forkcache_report::Artifact { name: "sweep.meta.json".into(), bytes: merged.meta.into_bytes() },
    ];
    let paths =
        forkcache_report::write(out, &artifacts).with_context(|| format!("writing {}", out.display()))?;
    let files: Vec<String> = paths.iter().map(|path| path.display().to_string()).collect();
    if args.output.json {
        let mut json = files_json(out, &files);
        json["shards"] = merged.shards.into();
        json["rows"] = merged.rows.into();
        println!("{json}");
    } else if !args.quiet.quiet {
        for file in &files {
            println!("wrote {file}");
        }
        println!("{} shards, {} cells", merged.shards, merged.rows);
    }
    Ok(ExitCode::SUCCESS)
}
