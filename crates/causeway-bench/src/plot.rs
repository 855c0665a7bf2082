//! Throughput-latency plots, like the papers' figures: one line per protocol, throughput on
//! x, mean latency on y, one point per client count; and CDFs (a delay on x, the fraction
//! at or below it on y; [`CDF`] axes). SVG or PNG by the file's extension.
//! Text is laid out with the DejaVu Sans font embedded in the binary (the machines this
//! runs on have no system fonts), registered once with plotters' `ab_glyph` backend.

use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

/// One line: a label and its (throughput txn/s, mean latency ms) points in sweep order,
/// or its (delay ms, fraction) points of a CDF.
#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// What the axes show and how lines are drawn.
pub struct Axes<'a> {
    pub x: &'a str,
    pub y: &'a str,
    /// Log axes when the x values span more than [`LOG_SPAN`]x.
    pub log_when_wide: bool,
    /// A log y axis when the y values span more than [`LOG_SPAN_Y`]x (x may stay linear).
    pub log_y_when_wide: bool,
    /// A dot on every point (sweeps), or the line alone (CDFs).
    pub dots: bool,
    /// Where the legend goes.
    pub legend: SeriesLabelPosition,
}

/// Throughput-latency curves.
pub const THROUGHPUT_LATENCY: Axes<'static> = Axes {
    x: "throughput (committed txn/s)",
    y: "mean latency (ms)",
    log_when_wide: true,
    log_y_when_wide: false,
    dots: true,
    legend: SeriesLabelPosition::UpperLeft,
};

/// Peak throughput against partitions per DC (UniStore Fig. 4).
pub const SCALING: Axes<'static> = Axes {
    x: "partitions per DC",
    y: "peak throughput (committed txn/s)",
    log_when_wide: false,
    log_y_when_wide: false,
    dots: true,
    legend: SeriesLabelPosition::UpperLeft,
};

/// Cumulative distributions of a delay in ms.
pub const CDF: Axes<'static> = Axes {
    x: "delay (ms)",
    y: "fraction at or below",
    log_when_wide: false,
    log_y_when_wide: false,
    dots: false,
    legend: SeriesLabelPosition::MiddleMiddle,
};

/// Throughput-latency curves of protocols whose latencies lie decades apart (PaRiS
/// Fig. 2: blocking reads against non-blocking ones): the latency axis turns
/// logarithmic when they span more than [`LOG_SPAN_Y`]x, as the paper's does.
pub const THROUGHPUT_LOG_LATENCY: Axes<'static> = Axes {
    log_y_when_wide: true,
    ..THROUGHPUT_LATENCY
};

/// Most series one plot draws (the palette's size).
pub const SERIES_MAX: usize = 12;
const PALETTE: [RGBColor; SERIES_MAX] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
    RGBColor(127, 127, 127),
    RGBColor(0, 0, 128),
    RGBColor(128, 0, 0),
];
const SIZE: (u32, u32) = (900, 560);

/// Checks that `path` names a format this module writes (`.svg` or `.png`).
pub fn check_path(path: &Path) -> Result<(), String> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg") | Some("png") => Ok(()),
        _ => Err(format!(
            "--plot {}: the file must end in .svg or .png",
            path.display()
        )),
    }
}

fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let font = dejavu::sans::regular();
        // Errors only on a corrupt font, which the embedded one is not.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, font);
    });
}

/// Draws throughput-latency `series` under `title` into `path` (`.svg` or `.png`).
pub fn plot(path: &Path, title: &str, series: &[Series]) -> Result<(), String> {
    plot_on(path, title, series, &THROUGHPUT_LATENCY)
}

/// Draws `series` on `axes` under `title` into `path` (`.svg` or `.png`).
pub fn plot_on(path: &Path, title: &str, series: &[Series], axes: &Axes) -> Result<(), String> {
    if series.is_empty() || series.len() > SERIES_MAX {
        return Err(format!(
            "a plot draws 1 to {SERIES_MAX} series, got {}",
            series.len()
        ));
    }
    check_path(path)?;
    register_fonts();
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "svg" => draw(
            SVGBackend::new(path, SIZE).into_drawing_area(),
            title,
            series,
            axes,
        ),
        "png" => draw(
            BitMapBackend::new(path, SIZE).into_drawing_area(),
            title,
            series,
            axes,
        ),
        _ => Err(format!(
            "--plot {}: the file must end in .svg or .png",
            path.display()
        )),
    }
}

/// `1234567` as `1.23M`, `45000` as `45k`: axis labels stay short.
fn short(v: f64) -> String {
    match v.abs() {
        a if a >= 1e6 => format!("{:.2}M", v / 1e6),
        a if a >= 1e3 => format!("{:.0}k", v / 1e3),
        _ => format!("{v:.0}"),
    }
}

fn bounds(series: &[Series]) -> (f64, f64) {
    let all = series.iter().flat_map(|s| s.points.iter());
    let (x, y) = all.fold((0.0f64, 0.0f64), |(x, y), p| (x.max(p.0), y.max(p.1)));
    (x.max(1.0) * 1.1, y.max(0.1) * 1.1)
}

/// Smallest positive throughput and latency, for log axes.
fn lower_bounds(series: &[Series]) -> (f64, f64) {
    let all = series.iter().flat_map(|s| s.points.iter());
    let (x, y) = all.fold((f64::MAX, f64::MAX), |(x, y), p| {
        (
            if p.0 > 0.0 { x.min(p.0) } else { x },
            if p.1 > 0.0 { y.min(p.1) } else { y },
        )
    });
    (x.min(1.0e9) / 1.5, y.min(1.0e9) / 1.5)
}

/// Whether throughputs span more than [`LOG_SPAN`]x (a simulated and a real sweep in one
/// figure): linear axes would then squash the slower curves against the y axis.
fn needs_log(series: &[Series]) -> bool {
    let (lo, _) = lower_bounds(series);
    let (hi, _) = bounds(series);
    hi / lo.max(1e-9) > LOG_SPAN
}

/// Throughput span above which both axes are logarithmic.
const LOG_SPAN: f64 = 100.0;

/// Latency span above which [`Axes::log_y_when_wide`] makes the y axis logarithmic.
pub const LOG_SPAN_Y: f64 = 20.0;

/// Whether the y values span more than [`LOG_SPAN_Y`]x.
fn needs_log_y(series: &[Series]) -> bool {
    let (_, lo) = lower_bounds(series);
    let (_, hi) = bounds(series);
    hi / lo.max(1e-9) > LOG_SPAN_Y
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    series: &[Series],
    axes: &Axes,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("plot: {e}");
    root.fill(&WHITE).map_err(e)?;
    let (x_max, y_max) = bounds(series);
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64);
    const LOG: &str = " (log scale)";
    let (x_min, y_min) = lower_bounds(series);
    if axes.log_when_wide && needs_log(series) {
        let x = (x_min..x_max).log_scale();
        let y = (y_min..y_max).log_scale();
        let chart = builder.build_cartesian_2d(x, y).map_err(e)?;
        fill(chart, series, axes, (LOG, LOG))?;
    } else if axes.log_y_when_wide && needs_log_y(series) {
        let y = (y_min..y_max).log_scale();
        let chart = builder.build_cartesian_2d(0f64..x_max, y).map_err(e)?;
        fill(chart, series, axes, ("", LOG))?;
    } else {
        let chart = builder
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(e)?;
        fill(chart, series, axes, ("", ""))?;
    }
    root.present().map_err(e)
}

/// The mesh, one line with dots per series, and the legend, on linear or log axes.
fn fill<'a, DB, X, Y>(
    mut chart: ChartContext<'a, DB, Cartesian2d<X, Y>>,
    series: &[Series],
    axes: &Axes,
    (x_scale, y_scale): (&str, &str),
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("plot: {e}");
    chart
        .configure_mesh()
        .x_desc(format!("{}{x_scale}", axes.x))
        .x_label_formatter(&|v| short(*v))
        .y_desc(format!("{}{y_scale}", axes.y))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i];
        let line = LineSeries::new(s.points.clone(), color.stroke_width(2));
        chart
            .draw_series(line)
            .map_err(e)?
            .label(s.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        if axes.dots {
            let dots = s
                .points
                .iter()
                .map(move |p| Circle::new(*p, 4, color.filled()));
            chart.draw_series(dots).map_err(e)?;
        }
    }
    chart
        .configure_series_labels()
        .position(axes.legend.clone())
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Vec<Series> {
        let a = Series {
            label: "eventual".into(),
            points: vec![(100.0, 2.0), (400.0, 3.0)],
        };
        let b = Series {
            label: "cure".into(),
            points: vec![(80.0, 4.0), (250.0, 9.0)],
        };
        vec![a, b]
    }

    #[test]
    fn writes_an_svg_with_both_lines_and_labels() {
        let path = std::env::temp_dir().join(format!("causeway-plot-{}.svg", std::process::id()));
        plot(&path, "test", &two()).expect("plot");
        let svg = std::fs::read_to_string(&path).expect("written");
        assert!(svg.contains("<svg"), "an svg document");
        assert!(
            svg.contains("eventual") && svg.contains("cure"),
            "legend labels"
        );
        assert!(svg.matches("<polyline").count() >= 2, "two lines");
    }

    #[test]
    fn writes_a_png_and_refuses_other_extensions() {
        let dir = std::env::temp_dir();
        let png = dir.join(format!("causeway-plot-{}.png", std::process::id()));
        plot(&png, "test", &two()).expect("plot");
        let bytes = std::fs::read(&png).expect("written");
        assert_eq!(&bytes[1..4], b"PNG");
        let e = plot(&dir.join("x.jpg"), "t", &two()).expect_err("jpg");
        assert!(e.contains(".svg or .png"), "{e}");
    }

    #[test]
    fn curves_three_decades_apart_get_log_axes() {
        assert!(!needs_log(&two()));
        let mut both = two();
        both.push(Series {
            label: "cure (real)".into(),
            points: vec![(1.0e5, 1.0), (4.0e5, 2.0)],
        });
        assert!(needs_log(&both));
        let path =
            std::env::temp_dir().join(format!("causeway-plot-log-{}.svg", std::process::id()));
        plot(&path, "test", &both).expect("plot");
        let svg = std::fs::read_to_string(&path).expect("written");
        assert!(
            svg.contains("log scale") && svg.matches("<polyline").count() >= 3,
            "three lines on log axes"
        );
    }

    #[test]
    fn latencies_decades_apart_get_a_log_y_axis_where_asked() {
        let mut wide = two();
        wide.push(Series {
            label: "bpr".into(),
            points: vec![(90.0, 150.0), (200.0, 400.0)],
        });
        assert!(needs_log_y(&wide) && !needs_log(&wide));
        assert!(!needs_log_y(&two()));
        let dir = std::env::temp_dir();
        let path = dir.join(format!("causeway-plot-logy-{}.svg", std::process::id()));
        plot_on(&path, "test", &wide, &THROUGHPUT_LOG_LATENCY).expect("plot");
        let svg = std::fs::read_to_string(&path).expect("written");
        assert!(svg.contains("mean latency (ms) (log scale)"), "log y");
        assert!(!svg.contains("txn/s) (log scale)"), "linear x");
        plot(&path, "test", &wide).expect("plot");
        let svg = std::fs::read_to_string(&path).expect("written");
        assert!(!svg.contains("log scale"), "not unless asked");
    }
}
