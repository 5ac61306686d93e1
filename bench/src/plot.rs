//! Plots for `--svg DIR`, drawn with plotters' SVG backend (no fonts needed:
//! the SVG names a font family and the viewer draws the text; plotters only
//! estimates text sizes to lay out labels).
//!
//! Three shapes, each returning the SVG text:
//! - [`lines`]: one line per series over time (hot-set residency);
//! - [`histograms`]: one bar panel per series, same axes (ticks per victim);
//! - [`stacked_bars`]: one stacked bar per category (residency by relation).

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{BenchError, Result};

/// Colours that stay distinct in print and for the common kinds of colour
/// blindness (Okabe-Ito), then a few more.
const COLOURS: [RGBColor; 10] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
    RGBColor(150, 75, 0),
];

/// The `i`-th colour of the palette (cycling).
pub fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

const FONT: &str = "sans-serif";

fn err<E: std::fmt::Debug>(e: E) -> BenchError {
    BenchError::Plot(format!("{e:?}"))
}

/// One line of a [`lines`] chart.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Dashed (e.g. the clock) or solid.
    pub dashed: bool,
    pub colour: usize,
}

/// A line chart. `mark_x`: a vertical marker (e.g. where the measured window
/// starts) with its label.
pub fn lines(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    y_range: (f64, f64),
    mark_x: Option<(f64, &str)>,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 540)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let x_max = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .fold(1e-9_f64, f64::max);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 22))
            .margin(16)
            .x_label_area_size(46)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_max, y_range.0..y_range.1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        if let Some((x, label)) = mark_x {
            let grey = RGBColor(150, 150, 150);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x, y_range.0), (x, y_range.1)],
                    6,
                    4,
                    grey.stroke_width(1),
                ))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    label.to_string(),
                    (x, y_range.1),
                    (FONT, 13).into_font().color(&grey),
                )))
                .map_err(err)?;
        }
        for s in series {
            let c = colour(s.colour);
            let style = c.stroke_width(2);
            let anno = if s.dashed {
                chart
                    .draw_series(DashedLineSeries::new(s.points.clone(), 8, 5, style))
                    .map_err(err)?
            } else {
                chart
                    .draw_series(LineSeries::new(s.points.clone(), style))
                    .map_err(err)?
            };
            let dashed = s.dashed;
            anno.label(s.name.clone()).legend(move |(x, y)| {
                let style = c.stroke_width(2);
                // Dashed: two dashes; solid: the second dash closes the gap.
                let gap = if dashed { 12 } else { 6 };
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, 0), (7, 0)], style)
                    + PathElement::new(vec![(gap, 0), (19, 0)], style)
            });
        }
        chart
            .configure_series_labels()
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// One panel of [`histograms`]: a name and one value per bucket.
#[derive(Clone, Debug)]
pub struct Bars {
    pub name: String,
    pub values: Vec<f64>,
}

/// One bar chart per entry of `panels`, stacked vertically with the same
/// buckets (`labels`) and the same y axis.
pub fn histograms(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    labels: &[String],
    panels: &[Bars],
) -> Result<String> {
    let mut svg = String::new();
    {
        let height = 80 + 300 * panels.len() as u32;
        let root = SVGBackend::with_string(&mut svg, (960, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root
            .titled(title, (FONT, 22))
            .map_err(err)?
            .margin(0, 10, 10, 10);
        let y_max = panels
            .iter()
            .flat_map(|p| p.values.iter().copied())
            .fold(1e-9_f64, f64::max)
            * 1.1;
        let areas = root.split_evenly((panels.len().max(1), 1));
        for (i, (p, area)) in panels.iter().zip(areas.iter()).enumerate() {
            bar_panel(area, &p.name, x_desc, y_desc, labels, &p.values, y_max, i)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[allow(clippy::too_many_arguments)]
fn bar_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    name: &str,
    x_desc: &str,
    y_desc: &str,
    labels: &[String],
    values: &[f64],
    y_max: f64,
    colour_index: usize,
) -> Result<()> {
    let n = labels.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(name, (FONT, 17))
        .margin(8)
        .x_label_area_size(42)
        .y_label_area_size(70)
        .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..y_max)
        .map_err(err)?;
    let labels_owned = labels.to_vec();
    let fmt = move |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
            labels_owned.get(*i).cloned().unwrap_or_default()
        }
        SegmentValue::Last => String::new(),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&fmt)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(
            Histogram::vertical(&chart)
                .style(colour(colour_index).filled())
                .margin(3)
                .data(values.iter().enumerate().map(|(i, &v)| (i, v))),
        )
        .map_err(err)?;
    Ok(())
}

/// Stacked bars: one bar per category, one layer per part
/// (`parts[j].values[i]` = part j of category i), bottom to top.
pub fn stacked_bars(
    title: &str,
    y_desc: &str,
    categories: &[String],
    parts: &[Bars],
) -> Result<String> {
    let mut svg = String::new();
    {
        let n = categories.len().max(1);
        let width = (200 + 150 * n as u32).max(960);
        let root = SVGBackend::with_string(&mut svg, (width, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let totals: Vec<f64> = (0..n)
            .map(|i| {
                parts
                    .iter()
                    .map(|p| p.values.get(i).copied().unwrap_or(0.0))
                    .sum()
            })
            .collect();
        // Head room for the legend above the bars.
        let y_max = totals.iter().copied().fold(1e-9_f64, f64::max)
            * (1.0 + 0.1 * (parts.len() as f64).max(3.0));
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 22))
            .margin(16)
            .x_label_area_size(46)
            .y_label_area_size(80)
            .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..y_max)
            .map_err(err)?;
        let cats = categories.to_vec();
        let fmt = move |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                cats.get(*i).cloned().unwrap_or_default()
            }
            SegmentValue::Last => String::new(),
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&fmt)
            .y_label_formatter(&|y| format!("{y:.0}"))
            .y_desc(y_desc)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 15))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        let mut base = vec![0.0; n];
        for (j, p) in parts.iter().enumerate() {
            let c = colour(j);
            let bottoms = base.clone();
            let tops: Vec<f64> = (0..n)
                .map(|i| bottoms[i] + p.values.get(i).copied().unwrap_or(0.0))
                .collect();
            let bottoms_for_fn = bottoms.clone();
            chart
                .draw_series(
                    Histogram::vertical(&chart)
                        .style(c.filled())
                        .margin(24)
                        .baseline_func(move |v: &SegmentValue<usize>| match v {
                            SegmentValue::Exact(i) | SegmentValue::CenterOf(i) => {
                                bottoms_for_fn.get(*i).copied().unwrap_or(0.0)
                            }
                            SegmentValue::Last => 0.0,
                        })
                        .data(tops.iter().enumerate().map(|(i, &v)| (i, v))),
                )
                .map_err(err)?
                .label(p.name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
            base = tops;
        }
        chart
            .configure_series_labels()
            .label_font((FONT, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Stacked bars of resident pages per relation, one bar per configuration,
/// plus the free buffers. One bar per configuration of
/// `scan-resistance` and `index-residency`.
pub fn residency_bars(
    title: &str,
    pool_buffers: usize,
    configs: &[(String, &[crate::dataset::RelPages])],
) -> Option<String> {
    let mut names: Vec<String> = Vec::new();
    for (_, res) in configs {
        for r in res.iter() {
            if (r.kind == "table" || r.kind == "index") && !names.contains(&r.name) {
                names.push(r.name.clone());
            }
        }
    }
    names.sort_by_key(|n| {
        // Indexes first (bottom of the stack), then tables.
        let is_table = configs
            .iter()
            .flat_map(|(_, r)| r.iter())
            .any(|r| &r.name == n && r.kind == "table");
        (is_table, n.clone())
    });
    let mut parts: Vec<Bars> = names
        .iter()
        .map(|n| Bars {
            name: n.clone(),
            values: configs
                .iter()
                .map(|(_, r)| {
                    r.iter()
                        .find(|x| &x.name == n)
                        .map_or(0.0, |x| x.pages as f64)
                })
                .collect(),
        })
        .collect();
    parts.push(Bars {
        name: "other (clog, catalog)".into(),
        values: configs
            .iter()
            .map(|(_, r)| {
                r.iter()
                    .filter(|x| x.kind != "table" && x.kind != "index")
                    .map(|x| x.pages as f64)
                    .sum()
            })
            .collect(),
    });
    parts.push(Bars {
        name: "free".into(),
        values: configs
            .iter()
            .map(|(_, r)| {
                pool_buffers.saturating_sub(r.iter().map(|x| x.pages).sum::<usize>()) as f64
            })
            .collect(),
    });
    let cats: Vec<String> = configs.iter().map(|(l, _)| l.clone()).collect();
    stacked_bars(title, "pages resident", &cats, &parts).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shape_draws_without_fonts() {
        let s = lines(
            "t",
            "x",
            "y",
            &[Series {
                name: "a".into(),
                points: vec![(0.0, 1.0), (1.0, 2.0)],
                dashed: true,
                colour: 0,
            }],
            (0.0, 3.0),
            Some((0.5, "window")),
        )
        .unwrap();
        assert!(s.starts_with("<svg") && s.contains("window"));
        let labels = vec!["1".to_string(), "2".to_string()];
        let bars = [Bars {
            name: "clock".into(),
            values: vec![1.0, 2.0],
        }];
        let h = histograms("t", "x", "y", &labels, &bars).unwrap();
        assert!(h.contains("clock"));
        let st = stacked_bars("t", "pages", &labels, &bars).unwrap();
        assert!(st.contains("<rect"));
    }
}
