//! The `--plot DIR` output: one SVG per section, the primary metric's median
//! against the cases, one line per variant, on a logarithmic y axis (the
//! variants of one table can differ by two orders of magnitude), with head
//! room above the data for the legend.
//!
//! Cases are categories, evenly spaced and labelled as in the table. Text is
//! emitted as SVG `<text>` elements sized by plotters' built-in estimate: the
//! crate is built without font features, so nothing is rasterised and no
//! system font library is needed.

use std::path::{Path, PathBuf};

use itertools::Itertools;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use super::format::fmt_sig;
use super::report::{ExperimentReport, SectionReport};
use super::LabError;

const COLOURS: [RGBColor; 6] = [
    RGBColor(0xd6, 0x27, 0x28), // before: red
    RGBColor(0x1f, 0x77, 0xb4), // after: blue
    RGBColor(0x2c, 0xa0, 0x2c), // green
    RGBColor(0x94, 0x67, 0xbd), // purple
    RGBColor(0xff, 0x7f, 0x0e), // orange
    RGBColor(0x8c, 0x56, 0x4b), // brown
];

/// Writes one SVG per section of `exp` into `dir` (created if missing) and
/// returns the files written.
pub fn write_plots(exp: &ExperimentReport, dir: &Path) -> Result<Vec<PathBuf>, LabError> {
    std::fs::create_dir_all(dir).map_err(LabError::file(dir))?;
    let mut written = Vec::new();
    for section in &exp.sections {
        let path = dir.join(file_name(exp, section));
        if let Some(svg) = svg(exp, section)? {
            std::fs::write(&path, svg).map_err(LabError::file(&path))?;
            written.push(path);
        }
    }
    Ok(written)
}

/// `<experiment>-<table>.svg`.
fn file_name(exp: &ExperimentReport, section: &SectionReport) -> String {
    format!("{}-{}.svg", exp.name, slug(&section.title))
}

/// One section's chart as an SVG document (for a file, or inline in the
/// HTML report); `None` if no variant has a positive median to draw.
pub fn svg(exp: &ExperimentReport, section: &SectionReport) -> Result<Option<String>, LabError> {
    let mut out = String::new();
    let drawn = draw(exp, section, &mut out).map_err(|message| LabError::Plot {
        path: PathBuf::from(file_name(exp, section)),
        message,
    })?;
    Ok(drawn.then_some(out))
}

/// `"wake with no waiters"` → `"wake-with-no-waiters"`.
fn slug(title: &str) -> String {
    let mut out = String::new();
    for ch in title.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// Round tick values for a log axis over `lo..hi`: as many of the 1-1.5-2-
/// 3-5-7 series per decade as fit in about a dozen ticks.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let series: [&[f64]; 3] = [&[1.0, 1.5, 2.0, 3.0, 5.0, 7.0], &[1.0, 2.0, 5.0], &[1.0]];
    let mut out = Vec::new();
    for mantissas in series {
        out.clear();
        let mut decade = 10f64.powf(lo.log10().floor());
        while decade <= hi {
            out.extend(
                mantissas
                    .iter()
                    .map(|m| m * decade)
                    .filter(|v| (lo..=hi).contains(v)),
            );
            decade *= 10.0;
        }
        if out.len() <= 12 {
            break;
        }
    }
    out
}

/// Draws one chart into `out`; `false` if there is nothing to draw.
fn draw(exp: &ExperimentReport, s: &SectionReport, out: &mut String) -> Result<bool, String> {
    let metric = s.primary();
    let lines: Vec<(String, Vec<(usize, f64)>)> = s
        .variants
        .iter()
        .map(|v| {
            let points = (0..s.cases.len())
                .filter_map(|c| s.median(c, &v.name, &metric.name).map(|m| (c, m)))
                .filter(|(_, m)| *m > 0.0)
                .collect();
            (v.name.clone(), points)
        })
        .collect();
    let values = lines.iter().flat_map(|(_, p)| p.iter().map(|(_, m)| *m));
    let Some((lo, hi)) = values.minmax_by(f64::total_cmp).into_option() else {
        return Ok(false);
    };
    let fail = |e: &dyn std::fmt::Display| e.to_string();

    let root = SVGBackend::with_string(out, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let caption = format!(
        "{}: {} — median {} ({})",
        exp.name, s.title, metric.name, metric.unit
    );
    let n = s.cases.len() as i32;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(
            (0..n - 1).into_segmented(),
            (lo / 1.5..hi * 3.0)
                .log_scale()
                .with_key_points(ticks(lo / 1.5, hi * 3.0)),
        )
        .map_err(|e| fail(&e))?;
    let label = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => usize::try_from(*i)
            .ok()
            .and_then(|i| s.cases.get(i))
            .map_or(String::new(), |c| c.label.clone()),
        SegmentValue::Last => String::new(),
    };
    chart
        .configure_mesh()
        .x_desc(s.param.as_str())
        .y_desc(format!("{} ({})", metric.name, metric.unit))
        .x_labels(s.cases.len())
        .x_label_formatter(&label)
        .y_label_formatter(&|v| fmt_sig(*v, 2))
        .draw()
        .map_err(|e| fail(&e))?;

    for (i, (name, points)) in lines.into_iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let at = |(c, m): (usize, f64)| (SegmentValue::CenterOf(c as i32), m);
        chart
            .draw_series(LineSeries::new(
                points.iter().copied().map(at),
                colour.stroke_width(2),
            ))
            .map_err(|e| fail(&e))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(at(p), 3, colour.filled())),
            )
            .map_err(|e| fail(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_are_round_and_few() {
        assert_eq!(ticks(2.0, 9.0), vec![2.0, 3.0, 5.0, 7.0]);
        assert_eq!(ticks(8.0, 60.0), vec![10.0, 15.0, 20.0, 30.0, 50.0]);
        assert_eq!(
            ticks(8.0, 6000.0),
            vec![10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0]
        );
        assert!(ticks(1e-3, 1e6).len() <= 12);
    }

    #[test]
    fn titles_become_file_name_slugs() {
        assert_eq!(slug("wake one at a time"), "wake-one-at-a-time");
        assert_eq!(slug("a/b (c)"), "a-b-c");
    }
}
