//! Reports: charts (PNG and SVG) and the CSV rows behind them.

pub mod chart;
