//! Charts as PNG and SVG, byte-identical on every machine: the font is embedded (DejaVu Sans via
//! plotters' `ab_glyph` backend, no system font lookup) and the PNG encoder's settings are fixed.

use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentValue;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Width of every chart, in pixels.
pub const WIDTH: u32 = 1200;
/// Height of every chart, in pixels.
pub const HEIGHT: u32 = 800;

const FONT: &str = "sans-serif";
const FONT_BYTES: &[u8] = include_bytes!("../../../fixtures/fonts/DejaVuSans.ttf");
const CAPTION_HEIGHT: u32 = 44;

/// Colours in series order: colour-blind-safe Okabe–Ito, without its yellow (too pale for a line
/// on white), then black and grey.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(213, 94, 0),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(140, 140, 140),
];

/// The colour of series `index`.
pub fn colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// How values on the value axis are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueFormat {
    /// `12,345` (abbreviated to k/M when large).
    Count,
    /// `42%`.
    Percent,
    /// `$1.23`.
    Usd,
    /// `2.46×`.
    Multiplier,
    /// `64` for 6: the axis carries log₂ of the values (a log scale whose ticks are powers of
    /// two); ticks between powers stay blank.
    PowerOfTwo,
}

impl ValueFormat {
    /// Formats one value.
    pub fn format(self, value: f64) -> String {
        match self {
            ValueFormat::Count => abbreviate(value),
            ValueFormat::Percent => format!("{value:.0}%"),
            ValueFormat::Usd if value.abs() >= 100.0 => format!("${value:.0}"),
            ValueFormat::Usd if value.abs() >= 1.0 => format!("${value:.2}"),
            ValueFormat::Usd => format!("${}", trim_zeros(&format!("{value:.4}"), 2)),
            ValueFormat::Multiplier => format!("{value:.2}×"),
            ValueFormat::PowerOfTwo => power_of_two(value),
        }
    }
}

/// `0.1000` → `0.10`: trailing zeros dropped, keeping at least `keep` decimals.
fn trim_zeros(text: &str, keep: usize) -> String {
    let Some(point) = text.find('.') else { return text.to_string() };
    let mut end = text.len();
    while end > point + 1 + keep && text.as_bytes()[end - 1] == b'0' {
        end -= 1;
    }
    text[..end].to_string()
}

fn power_of_two(exponent: f64) -> String {
    let rounded = exponent.round();
    if (exponent - rounded).abs() > 1e-6 || !(0.0..=62.0).contains(&rounded) {
        return String::new();
    }
    abbreviate((1u64 << rounded as u32) as f64)
}

fn abbreviate(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1e6 {
        format!("{:.1}M", value / 1e6)
    } else if magnitude >= 1e4 {
        format!("{:.0}k", value / 1e3)
    } else if magnitude >= 1e3 {
        format!("{:.1}k", value / 1e3)
    } else if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

/// Labels plotters draws on a linear axis (its default; set on every mesh so the two agree).
const AXIS_LABELS: usize = 11;

/// How every label of one linear axis is written. `Count` labels share one unit (none, k or M)
/// and one number of decimals, the fewest that write every tick exactly, so an axis never reads
/// `0, 0.20, 1` or `5.0k, 10k`; other formats are fixed already.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct AxisFormat {
    format: ValueFormat,
    unit: f64,
    suffix: &'static str,
    decimals: usize,
}

impl AxisFormat {
    /// The format of a linear axis over `range`, from the ticks plotters labels on it.
    pub(crate) fn for_axis(format: ValueFormat, range: std::ops::Range<f64>) -> AxisFormat {
        AxisFormat::for_ticks(format, &RangedCoordf64::from(range).key_points(AXIS_LABELS))
    }

    fn for_ticks(format: ValueFormat, ticks: &[f64]) -> AxisFormat {
        let largest = ticks.iter().fold(0.0f64, |m, t| m.max(t.abs()));
        let (unit, suffix) = match largest {
            l if l >= 1e6 => (1e6, "M"),
            l if l >= 1e3 => (1e3, "k"),
            _ => (1.0, ""),
        };
        let exact = |decimals: usize| ticks.iter().all(|t| is_whole(t / unit * 10f64.powi(decimals as i32)));
        let decimals = (0..3).find(|&d| exact(d)).unwrap_or(3);
        AxisFormat { format, unit, suffix, decimals }
    }

    /// One tick's label.
    pub(crate) fn label(&self, value: f64) -> String {
        match (self.format, value == 0.0) {
            (ValueFormat::Count, true) => format!("{:.*}", self.decimals, 0.0),
            (ValueFormat::Count, false) => format!("{:.*}{}", self.decimals, value / self.unit, self.suffix),
            (format, _) => format.format(value),
        }
    }
}

fn is_whole(value: f64) -> bool {
    (value - value.round()).abs() < 1e-6
}

/// One line of a line chart.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// `(x, y)` points, in x order: each drawn as a dot.
    pub points: Vec<(f64, f64)>,
    /// Where the value jumps rather than slopes, in x order: at `(x, y)` the line holds the value
    /// it had up to `x`, then rises or falls straight to `y` (a cost that changes at a TTL, not
    /// gradually). Between a step and the next point the line runs straight as usual.
    pub steps: Vec<(f64, f64)>,
    /// Dots alone, unjoined: values that exist only at their x (requests at their times), where
    /// a line would claim values in between that never were.
    pub dots_only: bool,
}

impl Series {
    /// A line through `points`, straight from one to the next.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { name: name.into(), points, steps: Vec::new(), dots_only: false }
    }

    /// A dot at each of `points`, nothing between them.
    pub fn dots(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { dots_only: true, ..Series::new(name, points) }
    }

    /// The same line jumping at `x` to the value of the first point past it, if there is one.
    pub fn stepping_at(mut self, x: f64) -> Series {
        if let Some(&(_, to)) = self.points.iter().find(|p| p.0 >= x) {
            if self.points.first().is_some_and(|first| first.0 < x) {
                self.steps.push((x, to));
            }
        }
        self
    }

    /// The path drawn: the points, with a corner pair at each step.
    pub(crate) fn path(&self) -> Vec<(f64, f64)> {
        let mut path: Vec<(f64, f64)> = Vec::with_capacity(self.points.len() + self.steps.len() * 2);
        let mut steps = self.steps.iter().peekable();
        for &(x, y) in &self.points {
            while let Some(&&(at, to)) = steps.peek().filter(|s| s.0 <= x) {
                let held = path.last().map_or(to, |p| p.1);
                path.extend([(at, held), (at, to)]);
                steps.next();
            }
            path.push((x, y));
        }
        path
    }
}

/// A labelled vertical line across a line chart (a TTL, a limit).
#[derive(Clone, Debug, PartialEq)]
pub struct XMark {
    /// Where, in x units.
    pub at: f64,
    /// Written at the top of the line.
    pub label: String,
}

/// Lines over a numeric x axis.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    /// Title.
    pub title: String,
    /// X axis label, with unit.
    pub x_label: String,
    /// Y axis label, with unit.
    pub y_label: String,
    /// How y values are written.
    pub y_format: ValueFormat,
    /// How x values are written.
    pub x_format: ValueFormat,
    /// Room beyond the first and last x on a linear x axis, in x units (so a dot at either end is
    /// drawn whole, and the axis can match a column chart's).
    pub x_margin: f64,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis (every y must be positive).
    pub log_y: bool,
    /// A linear y axis starts at 0 (off: it spans the data, for values far from 0).
    pub y_from_zero: bool,
    /// Where the legend sits (the corner the lines leave empty).
    pub legend: Corner,
    /// Draw earlier lines wider, so a line lying on an equal one still shows both colours.
    pub layered: bool,
    /// The lines.
    pub series: Vec<Series>,
    /// Vertical lines marking x values that matter.
    pub x_marks: Vec<XMark>,
    /// The small print under the chart (price-table date, seed, …).
    pub caption: String,
}

/// A corner of the plot area.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Corner {
    /// Top left.
    UpperLeft,
    /// Top right. Default.
    #[default]
    UpperRight,
    /// Bottom left.
    LowerLeft,
    /// Bottom right.
    LowerRight,
}

/// One bar of a bar chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// Category.
    pub label: String,
    /// Length.
    pub value: f64,
}

/// Horizontal bars, one per category, each labelled with its value.
#[derive(Clone, Debug, PartialEq)]
pub struct BarChart {
    /// Title.
    pub title: String,
    /// Value axis label, with unit.
    pub value_label: String,
    /// How values are written.
    pub value_format: ValueFormat,
    /// The bars, top to bottom.
    pub bars: Vec<Bar>,
    /// A vertical reference line (e.g. 1.0× for "no change").
    pub reference: Option<f64>,
    /// A logarithmic value axis, bars growing from the reference (1 when there is none): equal
    /// ratios get equal lengths, so 1.01× shows as small next to 2.47× but not as nothing.
    pub log_scale: bool,
    /// The small print under the chart.
    pub caption: String,
}

/// One column of a stacked column chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// Where its centre sits on the x axis (e.g. a start time).
    pub at: f64,
    /// One value per layer, bottom to top.
    pub values: Vec<f64>,
    /// A short mark drawn above the column (e.g. `F` for a fork), if any.
    pub mark: Option<String>,
}

/// Stacked columns on a numeric x axis (a time axis: gaps between columns are real gaps),
/// layers stacked bottom to top.
#[derive(Clone, Debug, PartialEq)]
pub struct StackedColumns {
    /// Title.
    pub title: String,
    /// X axis label, with unit.
    pub x_label: String,
    /// How x values are written.
    pub x_format: ValueFormat,
    /// Every column's width, in x units.
    pub column_width: f64,
    /// Y axis label, with unit.
    pub y_label: String,
    /// How y values are written.
    pub y_format: ValueFormat,
    /// Layer names, bottom to top (legend).
    pub layers: Vec<String>,
    /// The columns, left to right.
    pub columns: Vec<Column>,
    /// What the marks mean, appended to the caption.
    pub mark_legend: String,
    /// Where the legend sits.
    pub legend: Corner,
    /// The small print under the chart.
    pub caption: String,
}

/// A chart drawn both ways.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    /// PNG file bytes (RGB, `WIDTH`×`HEIGHT`).
    pub png: Vec<u8>,
    /// SVG document.
    pub svg: String,
}

/// A chart that could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("drawing chart {title:?}: {message}")]
pub struct ChartError {
    /// Which chart.
    pub title: String,
    /// What went wrong.
    pub message: String,
}

type DrawResult = Result<(), String>;

/// Registers the embedded font as plotters' `sans-serif`. Charts do this themselves; call it
/// before anything else in the process draws with plotters (criterion's plots), since this
/// crate builds plotters without system-font lookup.
#[allow(clippy::expect_used)] // the embedded font is fixed at build time and drawn by the tests
pub fn register_font() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES)
            .map_err(|_| ())
            .expect("the embedded font is a valid TrueType font");
    });
}

/// A chart that can draw itself on any plotters backend.
trait Draw {
    fn title(&self) -> &str;
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult;
}

/// Draws a chart onto a PNG and an SVG canvas.
fn render(chart: &impl Draw) -> Result<Rendered, ChartError> {
    register_font();
    let title = chart.title();
    let fail = |message: String| ChartError { title: title.to_string(), message };
    let mut pixels = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, (WIDTH, HEIGHT)).into_drawing_area();
        chart.draw(&root).map_err(fail)?;
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        chart.draw(&root).map_err(fail)?;
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    Ok(Rendered { png: encode_png(&pixels).map_err(fail)?, svg })
}

/// The canvas as an 8-bit RGB PNG: fast deflate, each row's filter chosen adaptively (the
/// encoder settings the bytes of every committed chart were made with).
fn encode_png(pixels: &[u8]) -> Result<Vec<u8>, String> {
    let mut png = Vec::new();
    let mut encoder = png::Encoder::new(&mut png, WIDTH, HEIGHT);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    encoder.set_filter(png::FilterType::Sub);
    encoder.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    writer.write_image_data(pixels).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok(png)
}

/// Fills the canvas, writes the caption in a strip at the bottom, returns the plot area.
fn frame<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    caption: &str,
) -> Result<DrawingArea<DB, Shift>, String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (plot, strip) = root.split_vertically(HEIGHT - CAPTION_HEIGHT);
    let style = TextStyle::from((FONT, 15).into_font()).color(&RGBColor(90, 90, 90));
    strip.draw_text(caption, &style, (20, 12)).map_err(|e| e.to_string())?;
    Ok(plot)
}

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (low, high) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if low.is_finite() { (low, high) } else { (0.0, 1.0) }
}

/// A y range from 0 (or the lowest negative value) to just above the highest value.
fn value_range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (low, high) = bounds(values);
    let low = low.min(0.0);
    let high = if high <= low { low + 1.0 } else { high + (high - low) * 0.08 };
    low..high
}

/// Draws a line chart.
pub fn line_chart(chart: &LineChart) -> Result<Rendered, ChartError> {
    render(chart)
}

impl Draw for LineChart {
    fn title(&self) -> &str {
        &self.title
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        draw_lines(root, self)
    }
}

fn draw_lines<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &LineChart) -> DrawResult {
    let plot = frame(root, &chart.caption)?;
    let points = || chart.series.iter().flat_map(|s| s.points.iter().copied());
    let x = axis_range(points().map(|p| p.0), chart.log_x, false);
    let x = if chart.log_x { x } else { x.start - chart.x_margin..x.end + chart.x_margin };
    let y = match (chart.log_y, chart.y_from_zero) {
        (false, false) => data_range(points().map(|p| p.1)),
        (log, _) => axis_range(points().map(|p| p.1), log, true),
    };
    let mut builder = ChartBuilder::on(&plot);
    builder.caption(&chart.title, (FONT, 28)).margin(20).x_label_area_size(60).y_label_area_size(90);
    let fail = |e: plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    match (chart.log_x, chart.log_y) {
        (false, false) => plot_lines(&mut builder.build_cartesian_2d(x, y).map_err(fail)?, chart),
        (true, false) => plot_lines(&mut builder.build_cartesian_2d(x.log_scale(), y).map_err(fail)?, chart),
        (false, true) => plot_lines(&mut builder.build_cartesian_2d(x, y.log_scale()).map_err(fail)?, chart),
        (true, true) => {
            plot_lines(&mut builder.build_cartesian_2d(x.log_scale(), y.log_scale()).map_err(fail)?, chart)
        }
    }
}

/// The span of an axis: from 0 (or the lowest value) to a little above the highest for a value
/// axis; exactly the data for a linear x axis; a padded span of positive values for a log axis.
fn axis_range(values: impl Iterator<Item = f64>, log: bool, padded: bool) -> std::ops::Range<f64> {
    if log {
        let (low, high) = bounds(values.filter(|v| *v > 0.0));
        let (low, high) = if low > 0.0 { (low, high) } else { (1.0, 10.0) };
        return if padded { low / 1.6..high * 1.6 } else { low..high.max(low * 1.01) };
    }
    if padded {
        return value_range(values);
    }
    let (low, high) = bounds(values);
    low..if high > low { high } else { low + 1.0 }
}

/// The data's span with a margin on both sides.
fn data_range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (low, high) = bounds(values);
    let margin = if high > low { (high - low) * 0.08 } else { 1.0 };
    low - margin..high + margin
}

fn plot_lines<'a, DB: DrawingBackend + 'a, X, Y>(
    ctx: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    chart: &LineChart,
) -> DrawResult
where
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    mesh(ctx, chart)?;
    lines(ctx, chart)
}

fn mesh<'a, DB: DrawingBackend + 'a, X, Y>(
    ctx: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    chart: &LineChart,
) -> DrawResult
where
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    // A log axis gets a tick at every 1–9 of each decade; labelling them all makes neighbours
    // collide ("90k100k"), so only 1, 2, 3 and 5 of each decade are labelled.
    // Plotters gives a decade's boundary twice (the end of one, the start of the next): the
    // second, at the same value, is left unlabelled so the two texts do not overprint.
    let previous_x = std::cell::Cell::new(f64::NAN);
    let x_axis = AxisFormat::for_axis(chart.x_format, ctx.x_range());
    let y_axis = AxisFormat::for_axis(chart.y_format, ctx.y_range());
    let x_format = |v: &f64| {
        let repeated = (*v - previous_x.replace(*v)).abs() <= v.abs() * 1e-9;
        match (repeated, chart.log_x) {
            (true, _) => String::new(),
            (false, true) if !labelled_log_tick(*v) => String::new(),
            (false, true) => chart.x_format.format(*v),
            (false, false) => x_axis.label(*v),
        }
    };
    let y_format = |v: &f64| match chart.log_y {
        true if !labelled_log_tick(*v) => String::new(),
        true => chart.y_format.format(*v),
        false => y_axis.label(*v),
    };
    ctx.configure_mesh()
        .x_labels(AXIS_LABELS)
        .y_labels(AXIS_LABELS)
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format)
        .axis_desc_style((FONT, 20))
        .label_style((FONT, 16))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(|e| e.to_string())
}

/// Whether a log axis's tick at `value` is labelled: one whose leading digit is 1, 2, 3 or 5.
fn labelled_log_tick(value: f64) -> bool {
    if !value.is_finite() || value <= 0.0 {
        return true;
    }
    let leading = (value / 10f64.powf(value.log10().floor())).round() as i64;
    // A decade's end (a leading "10") is the next decade's 1: drawn once, from the next decade.
    matches!(leading, 1 | 2 | 3 | 5)
}

fn lines<'a, DB: DrawingBackend + 'a, X, Y>(
    ctx: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    chart: &LineChart,
) -> DrawResult
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    x_marks(ctx, &chart.x_marks)?;
    for (index, series) in chart.series.iter().enumerate() {
        if series.dots_only {
            dots(ctx, series, index, chart.layered)?;
            continue;
        }
        let width = if chart.layered { 9u32.saturating_sub(2 * index as u32).max(3) } else { 3 };
        let style = ShapeStyle::from(colour(index)).stroke_width(width);
        ctx.draw_series(LineSeries::new(series.path(), style))
            .map_err(|e| e.to_string())?
            .label(series.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        ctx.draw_series(series.points.iter().map(|&p| Circle::new(p, 4, colour(index).filled())))
            .map_err(|e| e.to_string())?;
    }
    legend(ctx, chart.legend)
}

/// A series as dots alone; layered, earlier series' dots are larger, so a dot lying on an equal
/// one still shows both colours.
fn dots<'a, DB: DrawingBackend + 'a, X, Y>(
    ctx: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    series: &Series,
    index: usize,
    layered: bool,
) -> DrawResult
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let radius = if layered { 8u32.saturating_sub(2 * index as u32).max(3) } else { 4 };
    let fill = colour(index).filled();
    ctx.draw_series(series.points.iter().map(|&p| Circle::new(p, radius, fill)))
        .map_err(|e| e.to_string())?
        .label(series.name.as_str())
        .legend(move |(x, y)| Circle::new((x + 12, y), radius, fill));
    Ok(())
}

/// Grey vertical lines, each labelled at its top.
fn x_marks<'a, DB: DrawingBackend + 'a, X, Y>(
    ctx: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    marks: &[XMark],
) -> DrawResult
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let y = ctx.y_range();
    let grey = RGBColor(110, 110, 110);
    for mark in marks {
        let line =
            PathElement::new([(mark.at, y.start), (mark.at, y.end)], ShapeStyle::from(grey).stroke_width(2));
        ctx.draw_series(std::iter::once(line)).map_err(|e| e.to_string())?;
        let style = TextStyle::from((FONT, 16).into_font()).color(&grey).pos(Pos::new(HPos::Left, VPos::Top));
        let text = Text::new(format!(" {}", mark.label), (mark.at, y.end), style);
        ctx.draw_series(std::iter::once(text)).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    ctx: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    corner: Corner,
) -> DrawResult {
    let position = match corner {
        Corner::UpperLeft => SeriesLabelPosition::UpperLeft,
        Corner::UpperRight => SeriesLabelPosition::UpperRight,
        Corner::LowerLeft => SeriesLabelPosition::LowerLeft,
        Corner::LowerRight => SeriesLabelPosition::LowerRight,
    };
    ctx.configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(180, 180, 180))
        .label_font((FONT, 17))
        .draw()
        .map_err(|e| e.to_string())
}

/// Room for the longest bar label at the label font (about 9 px a character), within reason.
fn label_area_px(bars: &[Bar]) -> u32 {
    let longest = bars.iter().map(|b| b.label.chars().count()).max().unwrap_or(0) as u32;
    (longest * 9 + 24).clamp(120, 560)
}

/// Draws a horizontal bar chart.
pub fn bar_chart(chart: &BarChart) -> Result<Rendered, ChartError> {
    render(chart)
}

impl Draw for BarChart {
    fn title(&self) -> &str {
        &self.title
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        draw_bars(root, self)
    }
}

fn draw_bars<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &BarChart) -> DrawResult {
    let plot = frame(root, &chart.caption)?;
    let rows = (0u32..(chart.bars.len() as u32).saturating_sub(1)).into_segmented();
    let values = || chart.bars.iter().map(|b| b.value).chain(chart.reference);
    let mut builder = ChartBuilder::on(&plot);
    builder
        .caption(&chart.title, (FONT, 28))
        .margin(20)
        .x_label_area_size(60)
        .y_label_area_size(label_area_px(&chart.bars));
    let fail = |e: plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    if chart.log_scale {
        // Room on the right for the value written after the longest bar.
        let (low, high) = bounds(values().filter(|v| *v > 0.0));
        let range = (low / 1.05)..(high * 1.25);
        plot_bars(&mut builder.build_cartesian_2d(range.log_scale(), rows).map_err(fail)?, chart)
    } else {
        plot_bars(&mut builder.build_cartesian_2d(value_range(values()), rows).map_err(fail)?, chart)
    }
}

fn plot_bars<'a, DB: DrawingBackend + 'a, X>(
    ctx: &mut ChartContext<
        'a,
        DB,
        Cartesian2d<X, plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordu32>>,
    >,
    chart: &BarChart,
) -> DrawResult
where
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let count = chart.bars.len() as u32;
    // The first bar is drawn at the top.
    let row_of = |index: usize| count - 1 - index as u32;
    let label = |v: &SegmentValue<u32>| match v {
        SegmentValue::CenterOf(row) if *row < count => chart.bars[(count - 1 - row) as usize].label.clone(),
        _ => String::new(),
    };
    let value_format = |v: &f64| chart.value_format.format(*v);
    ctx.configure_mesh()
        .disable_y_mesh()
        .x_desc(chart.value_label.as_str())
        .x_label_formatter(&value_format)
        .y_label_formatter(&label)
        .y_labels(chart.bars.len().max(1))
        .axis_desc_style((FONT, 20))
        .label_style((FONT, 16))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(|e| e.to_string())?;
    let origin = if chart.log_scale { chart.reference.unwrap_or(1.0) } else { 0.0 };
    for (index, bar) in chart.bars.iter().enumerate() {
        let row = row_of(index);
        let corners = [(origin, SegmentValue::Exact(row)), (bar.value, SegmentValue::Exact(row + 1))];
        let mut rectangle = Rectangle::new(corners, colour(0).filled());
        rectangle.set_margin(6, 6, 0, 0);
        ctx.draw_series(std::iter::once(rectangle)).map_err(|e| e.to_string())?;
        let style = TextStyle::from((FONT, 16).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        let text = Text::new(
            format!("  {}", chart.value_format.format(bar.value)),
            (bar.value.max(origin), SegmentValue::CenterOf(row)),
            style,
        );
        ctx.draw_series(std::iter::once(text)).map_err(|e| e.to_string())?;
    }
    if let Some(reference) = chart.reference {
        let line = [(reference, SegmentValue::Exact(0)), (reference, SegmentValue::Exact(count))];
        ctx.draw_series(std::iter::once(PathElement::new(line, ShapeStyle::from(BLACK).stroke_width(2))))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Draws a stacked column chart.
pub fn stacked_columns(chart: &StackedColumns) -> Result<Rendered, ChartError> {
    render(chart)
}

impl Draw for StackedColumns {
    fn title(&self) -> &str {
        &self.title
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        draw_stacks(root, self).map(|_marks| ())
    }
}

/// Draws the chart, returning where its marks went.
fn draw_stacks<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &StackedColumns,
) -> Result<Vec<PlacedMark>, String> {
    let caption = if chart.mark_legend.is_empty() {
        chart.caption.clone()
    } else {
        format!("{} · {}", chart.mark_legend, chart.caption)
    };
    let plot = frame(root, &caption)?;
    let half = chart.column_width / 2.0;
    let x_range = column_span(&chart.columns, chart.column_width);
    let y_range = value_range(chart.columns.iter().map(|c| c.values.iter().sum::<f64>() * 1.05));
    let mut ctx = ChartBuilder::on(&plot)
        .caption(&chart.title, (FONT, 28))
        .margin(20)
        .x_label_area_size(60)
        .y_label_area_size(90)
        .build_cartesian_2d(x_range, y_range)
        .map_err(|e| e.to_string())?;
    let x_axis = AxisFormat::for_axis(chart.x_format, ctx.x_range());
    let y_axis = AxisFormat::for_axis(chart.y_format, ctx.y_range());
    let x_format = |v: &f64| x_axis.label(*v);
    let y_format = |v: &f64| y_axis.label(*v);
    ctx.configure_mesh()
        .x_labels(AXIS_LABELS)
        .y_labels(AXIS_LABELS)
        .disable_x_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format)
        .axis_desc_style((FONT, 20))
        .label_style((FONT, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(|e| e.to_string())?;
    for (layer, name) in chart.layers.iter().enumerate() {
        let rectangles = chart.columns.iter().map(|column| {
            let base: f64 = column.values[..layer.min(column.values.len())].iter().sum();
            let top = base + column.values.get(layer).copied().unwrap_or(0.0);
            Rectangle::new([(column.at - half, base), (column.at + half, top)], colour(layer).filled())
        });
        let fill = colour(layer).filled();
        ctx.draw_series(rectangles)
            .map_err(|e| e.to_string())?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 7), (x + 18, y + 7)], fill));
    }
    let marks = place_marks(root, &ctx, chart)?;
    draw_marks(root, &marks)?;
    legend(&mut ctx, chart.legend)?;
    Ok(marks)
}

/// The x span of a column chart: every column whole, with half a column of room beyond the
/// first and the last (so neither is cut by, or drawn on, the axis).
fn column_span(columns: &[Column], width: f64) -> std::ops::Range<f64> {
    let (first, last) = bounds(columns.iter().map(|c| c.at));
    let (start, end) = (first - width, last + width);
    if end > start { start..end } else { start..start + 1.0 }
}

/// A rectangle on the canvas, in pixels (y grows downwards; `right` and `bottom` excluded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PixelBox {
    pub left: i32,
    pub top: i32,
    pub right: i32,
    pub bottom: i32,
}

impl PixelBox {
    /// Whether the two share a pixel.
    pub(crate) fn overlaps(&self, other: &PixelBox) -> bool {
        self.left < other.right
            && other.left < self.right
            && self.top < other.bottom
            && other.top < self.bottom
    }

    /// The box of a `size` label centred over `anchor`, its bottom `MARK_GAP_PX` above it.
    pub(crate) fn above(anchor: (i32, i32), size: (u32, u32)) -> PixelBox {
        let (width, height) = (size.0 as i32, size.1 as i32);
        let left = anchor.0 - width / 2;
        let bottom = anchor.1 - MARK_GAP_PX;
        PixelBox { left, top: bottom - height, right: left + width, bottom }
    }
}

/// A column's mark where it is drawn: its text, the box it takes, and the top centre of its
/// column (where a raised mark's leader line starts).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PlacedMark {
    pub text: String,
    pub bounds: PixelBox,
    pub column_top: (i32, i32),
}

impl PlacedMark {
    /// Width and height of its text, in pixels.
    #[cfg(test)]
    pub(crate) fn size(&self) -> (u32, u32) {
        let b = &self.bounds;
        ((b.right - b.left) as u32, (b.bottom - b.top) as u32)
    }
}

/// Room between a mark and what it sits on, in pixels.
const MARK_GAP_PX: i32 = 2;
const MARK_FONT_SIZE: u32 = 15;

/// A label to place: the point it sits over (the top centre of its column) and its text's size,
/// in pixels.
#[derive(Clone, Copy, Debug)]
struct Label {
    anchor: (i32, i32),
    size: (u32, u32),
}

/// Each label just above its anchor, raised past whatever it would cover — an obstacle (a
/// column) or a label placed before it — so no two labels share a pixel.
fn stagger(labels: &[Label], obstacles: &[PixelBox]) -> Vec<PixelBox> {
    let mut taken = obstacles.to_vec();
    let mut placed = Vec::with_capacity(labels.len());
    for &Label { anchor, size } in labels {
        let mut bounds = PixelBox::above(anchor, size);
        // Each pass lifts the label above the highest thing it covers, so it passes each at most
        // once.
        for _ in 0..=taken.len() {
            let Some(top) = taken.iter().filter(|t| t.overlaps(&bounds)).map(|t| t.top).min() else { break };
            bounds = PixelBox::above((anchor.0, top), size);
        }
        taken.push(bounds);
        placed.push(bounds);
    }
    placed
}

fn mark_style() -> TextStyle<'static> {
    TextStyle::from((FONT, MARK_FONT_SIZE).into_font()).pos(Pos::new(HPos::Left, VPos::Top))
}

/// Every column's mark placed on the canvas, none covering another or a column.
fn place_marks<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    ctx: &ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    chart: &StackedColumns,
) -> Result<Vec<PlacedMark>, String> {
    let half = chart.column_width / 2.0;
    let total = |column: &Column| column.values.iter().sum::<f64>();
    let columns: Vec<PixelBox> = chart
        .columns
        .iter()
        .map(|column| {
            let (left, top) = ctx.backend_coord(&(column.at - half, total(column)));
            let (right, bottom) = ctx.backend_coord(&(column.at + half, 0.0));
            PixelBox { left, top, right: right.max(left + 1), bottom }
        })
        .collect();
    let mut labels = Vec::new();
    let mut texts = Vec::new();
    for (column, text) in chart.columns.iter().filter_map(|c| Some((c, c.mark.clone()?))) {
        let size = root.estimate_text_size(&text, &mark_style()).map_err(|e| e.to_string())?;
        labels.push(Label { anchor: ctx.backend_coord(&(column.at, total(column))), size });
        texts.push(text);
    }
    let placed = stagger(&labels, &columns);
    Ok(texts
        .into_iter()
        .zip(placed)
        .zip(&labels)
        .map(|((text, bounds), label)| PlacedMark { text, bounds, column_top: label.anchor })
        .collect())
}

/// The marks, each raised one joined to its column by a thin grey line.
fn draw_marks<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, marks: &[PlacedMark]) -> DrawResult {
    let grey = ShapeStyle::from(RGBColor(150, 150, 150)).stroke_width(1);
    for mark in marks {
        let (x, column_top) = mark.column_top;
        if mark.bounds.bottom < column_top - MARK_GAP_PX {
            let leader = PathElement::new([(x, column_top - 1), (x, mark.bounds.bottom)], grey);
            root.draw(&leader).map_err(|e| e.to_string())?;
        }
        let text = Text::new(mark.text.clone(), (mark.bounds.left, mark.bounds.top), mark_style());
        root.draw(&text).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Where the marks of a stacked column chart are drawn (drawn to a throwaway SVG).
#[cfg(test)]
pub(crate) fn placed_marks(chart: &StackedColumns) -> Result<Vec<PlacedMark>, ChartError> {
    register_font();
    let fail = |message: String| ChartError { title: chart.title.clone(), message };
    let mut svg = String::new();
    let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
    draw_stacks(&root, chart).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_line() -> LineChart {
        LineChart {
            title: "Savings vs history".into(),
            x_label: "history (tokens)".into(),
            y_label: "savings (%)".into(),
            y_format: ValueFormat::Percent,
            x_format: ValueFormat::Count,
            x_margin: 0.0,
            log_x: true,
            log_y: false,
            y_from_zero: true,
            legend: Corner::LowerRight,
            layered: false,
            series: vec![Series::new("N = 3", vec![(10_000.0, 80.0), (100_000.0, 89.7)])],
            x_marks: vec![XMark { at: 50_000.0, label: "a mark".into() }],
            caption: "prices of 2026-08-22 · seed 7".into(),
        }
    }

    #[test]
    fn a_log_axis_labels_1_2_3_and_5_of_each_decade() {
        let labelled: Vec<f64> =
            [10_000.0, 20_000.0, 30_000.0, 40_000.0, 50_000.0, 90_000.0, 100_000.0, 700_000.0]
                .into_iter()
                .filter(|v| labelled_log_tick(*v))
                .collect();
        assert_eq!(labelled, [10_000.0, 20_000.0, 30_000.0, 50_000.0, 100_000.0]);
    }

    #[test]
    fn png_has_the_stated_size_and_is_reproducible() {
        let first = line_chart(&sample_line()).unwrap();
        let second = line_chart(&sample_line()).unwrap();
        assert_eq!(first, second);
        // PNG signature, then the IHDR chunk: width and height as big-endian u32.
        assert_eq!(&first.png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(u32::from_be_bytes(first.png[16..20].try_into().unwrap()), WIDTH);
        assert_eq!(u32::from_be_bytes(first.png[20..24].try_into().unwrap()), HEIGHT);
        assert!(first.svg.starts_with("<svg"));
        assert!(first.svg.contains("Savings vs history"));
    }

    #[test]
    fn bars_and_stacks_draw() {
        let bars = BarChart {
            title: "Anti-patterns".into(),
            value_label: "cost vs correct twin (×)".into(),
            value_format: ValueFormat::Multiplier,
            bars: vec![
                Bar { label: "timestamp in system".into(), value: 3.2 },
                Bar { label: "parallel launch".into(), value: 1.4 },
            ],
            reference: Some(1.0),
            log_scale: false,
            caption: "c".into(),
        };
        assert!(bar_chart(&bars).unwrap().svg.contains("timestamp in system"));
        let log_bars = BarChart { log_scale: true, ..bars };
        assert!(bar_chart(&log_bars).unwrap().svg.contains("3.20×"));
        let stacks = StackedColumns {
            title: "Timeline".into(),
            x_label: "start (s)".into(),
            x_format: ValueFormat::Count,
            column_width: 1.0,
            y_label: "tokens".into(),
            y_format: ValueFormat::Count,
            layers: vec!["read".into(), "written".into(), "uncached".into()],
            columns: vec![
                Column { at: 0.0, values: vec![0.0, 5000.0, 10.0], mark: None },
                Column { at: 30.0, values: vec![5000.0, 800.0, 0.0], mark: Some("F".into()) },
            ],
            mark_legend: "F = fork".into(),
            legend: Corner::UpperLeft,
            caption: "c".into(),
        };
        assert!(stacked_columns(&stacks).unwrap().png.len() > 1000);
    }

    #[test]
    fn a_step_holds_the_value_up_to_its_x() {
        let series =
            Series::new("5m", vec![(0.0, 1.0), (4.0, 1.0), (6.0, 2.0), (30.0, 2.0)]).stepping_at(5.0);
        // The jump between x = 4 and x = 6 sits at 5; no step lies between 6 and 30.
        assert_eq!(
            series.path(),
            vec![(0.0, 1.0), (4.0, 1.0), (5.0, 1.0), (5.0, 2.0), (6.0, 2.0), (30.0, 2.0)]
        );
    }

    #[test]
    fn two_steps_between_two_points_hold_the_level_between_them() {
        let series =
            Series { steps: vec![(2.0, 5.0), (3.0, 9.0)], ..Series::new("s", vec![(0.0, 1.0), (4.0, 9.0)]) };
        assert_eq!(
            series.path(),
            vec![(0.0, 1.0), (2.0, 1.0), (2.0, 5.0), (3.0, 5.0), (3.0, 9.0), (4.0, 9.0)]
        );
    }

    #[test]
    fn a_step_past_every_point_is_not_drawn() {
        let series = Series::new("1h", vec![(0.0, 1.0), (6.0, 1.0)]).stepping_at(60.0);
        assert_eq!(series.path(), vec![(0.0, 1.0), (6.0, 1.0)]);
    }

    #[test]
    fn a_mark_that_would_cover_another_or_a_column_is_raised_past_it() {
        // Three 10×16 labels on columns 6 px apart, the third column 30 px taller: the first
        // sits on its column; the second would cover the first and the taller column, so it
        // rises above the taller; the third, above its own column, would cover the second.
        let columns = [
            PixelBox { left: 97, top: 200, right: 103, bottom: 400 },
            PixelBox { left: 103, top: 200, right: 109, bottom: 400 },
            PixelBox { left: 109, top: 170, right: 115, bottom: 400 },
        ];
        let labels = [(100, 200), (106, 200), (112, 170)].map(|anchor| Label { anchor, size: (10, 16) });
        let placed = stagger(&labels, &columns);
        assert_eq!(placed[0], PixelBox { left: 95, top: 182, right: 105, bottom: 198 });
        assert_eq!(placed[1], PixelBox { left: 101, top: 152, right: 111, bottom: 168 });
        assert_eq!(placed[2], PixelBox { left: 107, top: 134, right: 117, bottom: 150 });
        for (i, a) in placed.iter().enumerate() {
            assert!(placed[i + 1..].iter().chain(&columns).all(|b| !a.overlaps(b)));
        }
    }

    #[test]
    fn an_axis_writes_every_tick_in_one_unit_with_one_number_of_decimals() {
        let labels =
            |format: &AxisFormat, ticks: &[f64]| ticks.iter().map(|&t| format.label(t)).collect::<Vec<_>>();
        let thousands = [0.0, 5_000.0, 10_000.0, 15_000.0, 20_000.0];
        let format = AxisFormat::for_ticks(ValueFormat::Count, &thousands);
        assert_eq!(labels(&format, &thousands), ["0", "5k", "10k", "15k", "20k"]); // not "5.0k"
        let minutes = [0.0, 0.2, 0.4, 1.0, 1.2, 2.0];
        let format = AxisFormat::for_ticks(ValueFormat::Count, &minutes);
        assert_eq!(labels(&format, &minutes), ["0.0", "0.2", "0.4", "1.0", "1.2", "2.0"]); // not "0.20", "1"
        let halves = [0.0, 2_500.0, 5_000.0];
        let format = AxisFormat::for_ticks(ValueFormat::Count, &halves);
        assert_eq!(labels(&format, &halves), ["0.0", "2.5k", "5.0k"]);
        // The ticks plotters draws on a 0–2.02 minute axis: one decimal each.
        let format = AxisFormat::for_axis(ValueFormat::Count, 0.0..2.02);
        let ticks = RangedCoordf64::from(0.0..2.02).key_points(AXIS_LABELS);
        assert!(ticks.len() > 3);
        assert!(labels(&format, &ticks).iter().all(|l| l.len() == 3 && l.as_bytes()[1] == b'.'), "{ticks:?}");
    }

    #[test]
    fn columns_have_half_a_column_of_room_beyond_the_first_and_last() {
        let column = |at: f64| Column { at, values: vec![1.0], mark: None };
        // Columns 0.1 wide at 0 and 2: their edges at -0.05 and 2.05, the axis from -0.1 to 2.1.
        assert_eq!(column_span(&[column(0.0), column(2.0)], 0.1), -0.1..2.1);
        assert_eq!(column_span(&[column(3.0)], 0.0), 3.0..4.0);
    }

    #[test]
    fn value_formats() {
        assert_eq!(ValueFormat::Count.format(31_140.0), "31k");
        assert_eq!(ValueFormat::Count.format(1_500_000.0), "1.5M");
        assert_eq!(ValueFormat::Percent.format(89.7), "90%");
        assert_eq!(ValueFormat::Multiplier.format(2.46), "2.46×");
        assert_eq!(ValueFormat::Usd.format(0.03333), "$0.0333");
        assert_eq!(ValueFormat::Usd.format(0.1), "$0.10");
        assert_eq!(ValueFormat::Usd.format(0.01), "$0.01");
        assert_eq!(ValueFormat::Usd.format(12.5), "$12.50");
        assert_eq!(ValueFormat::PowerOfTwo.format(6.0), "64");
        assert_eq!(ValueFormat::PowerOfTwo.format(0.0), "1");
        assert_eq!(ValueFormat::PowerOfTwo.format(2.5), "");
    }
}
