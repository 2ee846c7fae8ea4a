//! Timing shared by the benches that print a summary after criterion's report.

use std::time::Instant;

/// The median wall time of `passes` runs of `run`, in seconds.
pub fn median_secs(passes: usize, mut run: impl FnMut()) -> f64 {
    median_secs_prepared(passes, || (), |()| run())
}

/// The median wall time of `passes` runs of `run`, each on what `prepare` made for it just
/// before, in seconds. Neither the making nor the dropping of it is timed.
pub fn median_secs_prepared<T>(
    passes: usize,
    mut prepare: impl FnMut() -> T,
    mut run: impl FnMut(&mut T),
) -> f64 {
    let mut times: Vec<f64> = (0..passes)
        .map(|_| {
            let mut prepared = prepare();
            let start = Instant::now();
            run(&mut prepared);
            let elapsed = start.elapsed().as_secs_f64();
            drop(prepared);
            elapsed
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[passes / 2]
}
