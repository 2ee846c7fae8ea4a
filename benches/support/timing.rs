//! Timing shared by the benches that print a summary after criterion's report.

use std::time::Instant;

/// The median wall time of `passes` runs of `run`, in seconds.
pub fn median_secs(passes: usize, mut run: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..passes)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[passes / 2]
}
