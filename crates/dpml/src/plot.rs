//! Line charts written as PNG and SVG, with an embedded font so no system font library is
//! needed (plotters' `ab_glyph` backend). Log axes are drawn by plotting log10 of the values
//! and labelling ticks with the original numbers, so one code path serves every chart.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::error::{CliError, CliResult};

const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const PANEL_SIZE: (u32, u32) = (800, 600);

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A solid line.
    Line,
    /// A dashed line (bounds and reference curves).
    Dashed,
    /// A line with a marker on each point.
    LineWithPoints,
    /// A marker on each point, no line (a scatter of trials).
    Points,
}

/// One named series of (x, y) points, optionally with symmetric error bars on y.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// The points, in drawing order.
    pub points: Vec<(f64, f64)>,
    /// How to draw it.
    pub style: Style,
    /// Half-width of an error bar per point.
    pub error_bars: Option<Vec<f64>>,
}

impl Series {
    /// A series with no error bars.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>, style: Style) -> Self {
        Self {
            name: name.into(),
            points,
            style,
            error_bars: None,
        }
    }
}

/// One panel: axes, labels and series.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title above the panel.
    pub title: String,
    /// x-axis label.
    pub x_label: String,
    /// y-axis label.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The data.
    pub series: Vec<Series>,
}

/// Write `charts` side by side as `dir/stem.png` and `dir/stem.svg`.
pub fn write(charts: &[Chart], dir: &Path, stem: &str) -> CliResult<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::usage(format!("cannot create {}: {e}", dir.display())))?;
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    write_file(charts, &png)?;
    write_file(charts, &svg)?;
    Ok((png, svg))
}

/// Write `charts` side by side to `path`, a PNG or an SVG as its extension says.
pub fn write_file(charts: &[Chart], path: &Path) -> CliResult<()> {
    register_font()?;
    let size = (PANEL_SIZE.0 * charts.len().max(1) as u32, PANEL_SIZE.1);
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let present =
        |e: &dyn std::fmt::Display| CliError::usage(format!("writing {}: {e}", path.display()));
    match ext.as_str() {
        "png" => {
            let root = BitMapBackend::new(path, size).into_drawing_area();
            draw_panels(&root, charts)?;
            root.present().map_err(|e| present(&e))
        }
        "svg" => {
            let root = SVGBackend::new(path, size).into_drawing_area();
            draw_panels(&root, charts)?;
            root.present().map_err(|e| present(&e))
        }
        _ => Err(CliError::usage(format!(
            "plot file {} must end in .png or .svg",
            path.display()
        ))),
    }
}

fn register_font() -> CliResult<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        if plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_err() {
            result = Err(CliError::internal(
                "the embedded plot font could not be loaded",
            ));
        }
    });
    result
}

fn draw_panels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    charts: &[Chart],
) -> CliResult<()> {
    root.fill(&WHITE).map_err(draw_err)?;
    let panels = root.split_evenly((1, charts.len().max(1)));
    for (panel, chart) in panels.iter().zip(charts) {
        draw_chart(panel, chart)?;
    }
    Ok(())
}

fn draw_err<E: std::fmt::Display>(e: E) -> CliError {
    CliError::internal(format!("drawing a plot failed: {e}"))
}

/// Map a data value to plot coordinates (log10 on log axes); None when not drawable.
fn axis_value(v: f64, log: bool) -> Option<f64> {
    match (log, v.is_finite()) {
        (_, false) => None,
        (true, _) if v <= 0.0 => None,
        (true, _) => Some(v.log10()),
        (false, _) => Some(v),
    }
}

fn tick_label(v: f64, log: bool) -> String {
    let x = if log { 10f64.powf(v) } else { v };
    if x != 0.0 && (x.abs() < 1e-3 || x.abs() >= 1e5) {
        format!("{x:.0e}")
    } else {
        let s = format!("{x:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Bold and light mesh positions (in plot coordinates, log10 on log axes) for `lo..hi`.
///
/// Log axes: bold ticks at 1, 2 and 5 times each power of ten (powers of ten alone past four
/// decades, every integer multiple when 1-2-5 gives fewer than four), light lines at every
/// integer multiple, so labels read 0.1, 0.2, 0.5, 1 rather than evenly spaced logarithms.
/// Linear axes: five to ten bold ticks at a step of 1, 2 or 5
/// times a power of ten, five light lines per step.
fn ticks(lo: f64, hi: f64, log: bool) -> (Vec<f64>, Vec<f64>) {
    let inside = |v: &f64| (lo..=hi).contains(v);
    if log {
        let decades = (lo.floor() as i32)..=(hi.ceil() as i32);
        let at = |mults: &[f64]| -> Vec<f64> {
            decades
                .clone()
                .flat_map(|k| mults.iter().map(move |m| (m * 10f64.powi(k)).log10()))
                .filter(inside)
                .collect()
        };
        let every: Vec<f64> = (1..10).map(f64::from).collect();
        let bold = match hi - lo {
            span if span > 4.0 => at(&[1.0]),
            _ => Some(at(&[1.0, 2.0, 5.0]))
                .filter(|b| b.len() >= 4)
                .unwrap_or_else(|| at(&every)),
        };
        if bold.len() < 3 {
            // Less than a decade with too few integer multiples (13 to 20): round linear
            // steps of the values themselves read better.
            let (b, l) = ticks(10f64.powf(lo), 10f64.powf(hi), false);
            let logs = |v: Vec<f64>| v.into_iter().filter(|&x| x > 0.0).map(f64::log10).collect();
            return (logs(b), logs(l));
        }
        return (bold, at(&every));
    }
    let raw = ((hi - lo) / 10.0).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude);
    let grid = |step: f64| -> Vec<f64> {
        let first = (lo / step).ceil() as i64;
        let last = (hi / step).floor() as i64;
        (first..=last).map(|i| i as f64 * step).collect()
    };
    (grid(step), grid(step / 5.0))
}

fn range_of(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = if hi > lo { 0.05 * (hi - lo) } else { 0.5 };
    (lo - pad, hi + pad)
}

/// A linear axis over `lo..hi` (log10 values on log axes) whose mesh is [`ticks`].
struct TickedAxis {
    inner: RangedCoordf64,
    bold: Vec<f64>,
    light: Vec<f64>,
}

impl TickedAxis {
    fn new(lo: f64, hi: f64, log: bool) -> Self {
        let (bold, light) = ticks(lo, hi, log);
        Self {
            inner: (lo..hi).into(),
            bold,
            light,
        }
    }
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

fn draw_chart<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, chart: &Chart) -> CliResult<()> {
    let mapped: Vec<Vec<(f64, f64, f64)>> = chart
        .series
        .iter()
        .map(|s| {
            s.points
                .iter()
                .enumerate()
                .filter_map(|(i, &(x, y))| {
                    let err = s
                        .error_bars
                        .as_ref()
                        .and_then(|e| e.get(i))
                        .copied()
                        .unwrap_or(0.0);
                    Some((axis_value(x, chart.log_x)?, y, err))
                })
                .collect()
        })
        .collect();
    let xs = mapped.iter().flatten().map(|p| p.0);
    let ys = mapped.iter().flatten().flat_map(|&(_, y, e)| {
        [
            axis_value(y - e, chart.log_y),
            axis_value(y + e, chart.log_y),
            axis_value(y, chart.log_y),
        ]
    });
    let (x0, x1) = range_of(xs);
    let (y0, y1) = range_of(ys.flatten());

    let mut ctx = ChartBuilder::on(area)
        .caption(&chart.title, ("sans-serif", title_size(area, &chart.title)))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(
            TickedAxis::new(x0, x1, chart.log_x),
            TickedAxis::new(y0, y1, chart.log_y),
        )
        .map_err(draw_err)?;
    let (log_x, log_y) = (chart.log_x, chart.log_y);
    ctx.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .x_label_formatter(&|v| tick_label(*v, log_x))
        .y_label_formatter(&|v| tick_label(*v, log_y))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(draw_err)?;

    // Data series get their own dash pattern and marker shape as well as their own colour,
    // so curves that coincide (ROC curves of similar attacks) stay told apart; reference
    // lines (bounds, baselines) are thin and uniformly dashed.
    let (mut data_index, mut reference_index) = (0, 0);
    for (series, points) in chart.series.iter().zip(&mapped) {
        let line: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|&(x, y, _)| Some((x, axis_value(y, log_y)?)))
            .collect();
        let look = match series.style {
            Style::Dashed => {
                reference_index += 1;
                Look::reference(reference_index - 1)
            }
            Style::Line | Style::LineWithPoints | Style::Points => {
                data_index += 1;
                Look::data(data_index - 1)
            }
        };
        let color = look.color;
        let style = color.stroke_width(look.width);
        // A scatter draws its line with no points: the legend entry without a line.
        let drawn = if series.style == Style::Points {
            Vec::new()
        } else {
            line.clone()
        };
        let anno = match look.dash {
            Some((size, gap)) => ctx
                .draw_series(DashedLineSeries::new(drawn, size, gap, style))
                .map_err(draw_err)?,
            None => ctx
                .draw_series(LineSeries::new(drawn, style))
                .map_err(draw_err)?,
        };
        anno.label(&series.name).legend(move |(x, y)| {
            let (path, polygon) = legend_sample(look);
            EmptyElement::at((x, y))
                + PathElement::new(path, color.stroke_width(look.width))
                + Polygon::new(polygon, color.filled())
        });
        if let Some(shape) = look.marker {
            let at = match series.style {
                Style::LineWithPoints | Style::Points => line.clone(),
                _ => spread_markers(&line, (x0, x1), data_index - 1),
            };
            ctx.draw_series(at.into_iter().map(|p| {
                EmptyElement::at(p) + Polygon::new(marker_outline(shape), color.filled())
            }))
            .map_err(draw_err)?;
        }
        if series.error_bars.is_some() {
            let bars = points.iter().filter_map(|&(x, y, e)| {
                let lo = axis_value(y - e, log_y).or_else(|| axis_value(y, log_y))?;
                let hi = axis_value(y + e, log_y)?;
                Some(ErrorBar::new_vertical(
                    x,
                    lo,
                    axis_value(y, log_y)?,
                    hi,
                    color.stroke_width(1),
                    8,
                ))
            });
            ctx.draw_series(bars).map_err(draw_err)?;
        }
    }
    ctx.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(legend_corner(&mapped, (x0, x1), (y0, y1), log_y))
        .draw()
        .map_err(draw_err)?;
    Ok(())
}

/// How one series is drawn: stroke width, dash pattern (dash, gap in pixels; `None` =
/// solid) and marker shape.
#[derive(Debug, Clone, Copy)]
struct Look {
    color: RGBAColor,
    width: u32,
    dash: Option<(u32, u32)>,
    marker: Option<usize>,
}

/// Colours of data series: the Okabe–Ito palette, told apart with colour-blindness too.
const DATA_COLORS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(240, 228, 66),
];
/// Colours of reference lines (baselines, bounds): black, then greys.
const REFERENCE_COLORS: [RGBColor; 3] = [
    RGBColor(0, 0, 0),
    RGBColor(120, 120, 120),
    RGBColor(180, 180, 180),
];
/// The largest and smallest title font sizes; long titles shrink to fit the panel.
const TITLE_SIZES: (u32, u32) = (22, 11);

/// Dash patterns of data series, in turn: solid, long dash, dots, dash with long gaps.
const DASHES: [Option<(u32, u32)>; 4] = [None, Some((12, 4)), Some((3, 4)), Some((18, 8))];
/// Marker shapes (see `marker`).
const MARKERS: usize = 4;
/// Markers drawn along a line series with many points.
const MARKERS_PER_LINE: usize = 8;

impl Look {
    /// The `j`-th data series.
    fn data(j: usize) -> Self {
        Self {
            color: DATA_COLORS[j % DATA_COLORS.len()].to_rgba(),
            width: 2,
            dash: DASHES[j % DASHES.len()],
            marker: Some(j % MARKERS),
        }
    }

    /// The `j`-th reference line: thin, dashed, no markers.
    fn reference(j: usize) -> Self {
        Self {
            color: REFERENCE_COLORS[j % REFERENCE_COLORS.len()].to_rgba(),
            width: 1,
            dash: Some((8, 5)),
            marker: None,
        }
    }
}

/// Pixel offsets from an anchor.
type Outline = Vec<(i32, i32)>;

/// A legend entry's sample, relative to its anchor: a line, and the polygon drawn over it
/// (the series' marker in its middle or, for a dashed line without markers, a second dash).
fn legend_sample(look: Look) -> (Outline, Outline) {
    match (look.marker, look.dash) {
        (Some(m), _) => (
            vec![(0, 0), (24, 0)],
            marker_outline(m)
                .into_iter()
                .map(|(u, v)| (u + 12, v))
                .collect(),
        ),
        (None, Some(_)) => (
            vec![(0, 0), (9, 0)],
            vec![(15, 0), (24, 0), (24, 1), (15, 1)],
        ),
        (None, None) => (vec![(0, 0), (24, 0)], Vec::new()),
    }
}

/// The largest title font size (at most [`TITLE_SIZES`]'s first) at which `title` fits the
/// panel's width; the smallest size when none does.
fn title_size<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: &str) -> u32 {
    let room = area.dim_in_pixel().0.saturating_sub(24);
    (TITLE_SIZES.1..=TITLE_SIZES.0)
        .rev()
        .find(|&size| {
            area.estimate_text_size(title, &("sans-serif", size).into_text_style(area))
                .is_ok_and(|(w, _)| w <= room)
        })
        .unwrap_or(TITLE_SIZES.1)
}

/// The outline of marker `shape` (round, triangle, square, diamond) around (0, 0), in
/// pixels. All shapes are polygons so that one element type serves plot and legend.
fn marker_outline(shape: usize) -> Outline {
    match shape % MARKERS {
        0 => vec![
            (4, 0),
            (3, 3),
            (0, 4),
            (-3, 3),
            (-4, 0),
            (-3, -3),
            (0, -4),
            (3, -3),
        ],
        1 => vec![(0, -5), (5, 4), (-5, 4)],
        2 => vec![(-4, -4), (4, -4), (4, 4), (-4, 4)],
        _ => vec![(0, -5), (5, 0), (0, 5), (-5, 0)],
    }
}

/// About [`MARKERS_PER_LINE`] points of `line` evenly spread over the x range, shifted by
/// the series index `j` so that markers of coinciding curves do not sit on each other.
fn spread_markers(line: &[(f64, f64)], (x0, x1): (f64, f64), j: usize) -> Vec<(f64, f64)> {
    let n = MARKERS_PER_LINE as f64;
    let offset = (j % MARKERS) as f64 / MARKERS as f64;
    let mut out: Vec<(f64, f64)> = (0..MARKERS_PER_LINE)
        .filter_map(|t| {
            let target = x0 + (t as f64 + offset) / n * (x1 - x0);
            line.iter()
                .copied()
                .min_by(|a, b| (a.0 - target).abs().total_cmp(&(b.0 - target).abs()))
        })
        .collect();
    out.dedup();
    out
}

/// The corner of the panel that the data leave emptiest, so the legend hides as little as
/// possible.
fn legend_corner(
    series: &[Vec<(f64, f64, f64)>],
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    log_y: bool,
) -> SeriesLabelPosition {
    let corners = [
        (SeriesLabelPosition::UpperRight, 0.55, 0.65),
        (SeriesLabelPosition::UpperLeft, 0.0, 0.65),
        (SeriesLabelPosition::LowerRight, 0.55, 0.0),
        (SeriesLabelPosition::LowerLeft, 0.0, 0.0),
    ];
    let crowding = |fx: f64, fy: f64| {
        series
            .iter()
            .flatten()
            .filter_map(|&(x, y, _)| Some((x, axis_value(y, log_y)?)))
            .filter(|&(x, y)| {
                let (u, v) = ((x - x0) / (x1 - x0), (y - y0) / (y1 - y0));
                (fx..fx + 0.45).contains(&u) && (fy..fy + 0.35).contains(&v)
            })
            .count()
    };
    corners
        .into_iter()
        .min_by_key(|&(_, fx, fy)| crowding(fx, fy))
        .map_or(SeriesLabelPosition::UpperRight, |(pos, _, _)| pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_fall_on_one_two_five_and_linear_ticks_on_round_steps() {
        let labels = |v: Vec<f64>| v.iter().map(|&t| tick_label(t, true)).collect::<Vec<_>>();
        let (bold, light) = ticks(0.1f64.log10() - 0.01, 5f64.log10() + 0.01, true);
        assert_eq!(labels(bold), ["0.1", "0.2", "0.5", "1", "2", "5"]);
        assert_eq!(light.len(), 9 + 5);
        let (bold, _) = ticks(0.75f64.log10(), 8.5f64.log10(), true);
        assert_eq!(
            labels(bold),
            ["0.8", "0.9", "1", "2", "3", "4", "5", "6", "7", "8"]
        );
        let (bold, _) = ticks(13f64.log10(), 21f64.log10(), true);
        let want: Vec<String> = (13..=21).map(|v| v.to_string()).collect();
        assert_eq!(labels(bold), want);
        let (bold, _) = ticks(-5.5, 0.5, true);
        assert_eq!(bold.len(), 6, "{bold:?}"); // 1e-5 … 1: decades only
        let (bold, light) = ticks(0.18, 1.02, false);
        let want = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];
        assert_eq!(bold.len(), want.len(), "{bold:?}");
        assert!(bold.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12));
        assert!((42..=44).contains(&light.len()), "{light:?}");
    }

    #[test]
    fn the_embedded_font_has_the_greek_letters_plots_use() {
        use ab_glyph::Font;
        let font = ab_glyph::FontRef::try_from_slice(FONT).unwrap();
        for c in "εδσαμβ±×−≥".chars() {
            assert_ne!(font.glyph_id(c).0, 0, "no glyph for {c}");
        }
    }

    #[test]
    fn markers_spread_over_the_range_and_differ_between_series() {
        let line: Vec<(f64, f64)> = (0..=100).map(|i| (f64::from(i) / 100.0, 0.5)).collect();
        let first = spread_markers(&line, (0.0, 1.0), 0);
        let second = spread_markers(&line, (0.0, 1.0), 1);
        assert_eq!(first.len(), MARKERS_PER_LINE);
        assert!(first.iter().all(|p| !second.contains(p)));
        let looks: Vec<_> = (0..MARKERS).map(Look::data).collect();
        for (i, a) in looks.iter().enumerate() {
            for b in &looks[i + 1..] {
                assert_ne!(a.marker, b.marker);
                assert_ne!(a.dash, b.dash);
            }
        }
    }

    #[test]
    fn writes_png_and_svg_with_log_axes() {
        let dir = tempfile::tempdir().unwrap();
        let chart = Chart {
            title: "test".into(),
            x_label: "epsilon".into(),
            y_label: "accuracy".into(),
            log_x: true,
            log_y: false,
            series: vec![
                Series {
                    name: "a".into(),
                    points: vec![(0.1, 0.2), (1.0, 0.6), (10.0, 0.9)],
                    style: Style::LineWithPoints,
                    error_bars: Some(vec![0.05, 0.02, 0.01]),
                },
                Series::new("baseline", vec![(0.1, 0.95), (10.0, 0.95)], Style::Dashed),
            ],
        };
        let (png, svg) = write(&[chart.clone(), chart], dir.path(), "plot").unwrap();
        let png_bytes = std::fs::read(png).unwrap();
        assert_eq!(&png_bytes[..8], b"\x89PNG\r\n\x1a\n");
        let svg_text = std::fs::read_to_string(svg).unwrap();
        assert!(svg_text.starts_with("<svg") && svg_text.trim_end().ends_with("</svg>"));
        assert!(svg_text.contains("epsilon"));
    }
}
