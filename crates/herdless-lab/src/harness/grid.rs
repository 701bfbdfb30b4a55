//! Text grids for the terminal: a header row, a rule, then the rows; the
//! first column (or the first few) left-aligned (labels), the others
//! right-aligned (numbers), two spaces between columns, no borders.
//!
//! A grid never exceeds the width it is given: when its columns do not fit,
//! they are split into several grids, each repeating the first column.

use std::fmt::Write as _;

use super::wrap::width;

const GAP: &str = "  ";

/// `header` and `rows` (each as long as `header`) as text no wider than
/// `max_width` columns (unless one column alone is wider); the first column
/// left-aligned.
pub fn grid(header: &[String], rows: &[Vec<String>], max_width: usize) -> String {
    grid_aligned(header, rows, 1, max_width)
}

/// [`grid`] with the first `left` columns left-aligned (the first one is
/// repeated when the grid splits).
pub fn grid_aligned(
    header: &[String],
    rows: &[Vec<String>],
    left: usize,
    max_width: usize,
) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| width(&r[i])).chain([width(&header[i])]).max().unwrap_or(0))
        .collect();
    if widths.is_empty() {
        return String::new();
    }
    // Split the columns after the first into chunks that fit beside it.
    let mut chunks: Vec<Vec<usize>> = Vec::new();
    let mut used = widths[0];
    for i in 1..widths.len() {
        let need = GAP.len() + widths[i];
        match chunks.last_mut() {
            Some(chunk) if used + need <= max_width => chunk.push(i),
            _ => {
                chunks.push(vec![i]);
                used = widths[0];
            }
        }
        used += need;
    }
    if chunks.is_empty() {
        chunks.push(Vec::new());
    }
    let mut out = String::new();
    for (n, chunk) in chunks.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let columns: Vec<usize> = std::iter::once(0).chain(chunk.iter().copied()).collect();
        let line = |cells: &dyn Fn(usize) -> String| {
            let mut l = String::new();
            for (k, &i) in columns.iter().enumerate() {
                let cell = cells(i);
                let pad = " ".repeat(widths[i] - width(&cell));
                let gap = if k == 0 { "" } else { GAP };
                if i < left {
                    let _ = write!(l, "{gap}{cell}{pad}");
                } else {
                    let _ = write!(l, "{gap}{pad}{cell}");
                }
            }
            l.trim_end().to_string() + "\n"
        };
        out.push_str(&line(&|i| header[i].clone()));
        out.push_str(&line(&|i| "-".repeat(widths[i])));
        for r in rows {
            out.push_str(&line(&|i| r[i].clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn columns_align_under_the_widest_cell() {
        let text = grid(&strings(&["n", "value"]), &[strings(&["512", "1.5"])], 100);
        assert_eq!(text, "n    value\n---  -----\n512    1.5\n");
    }

    #[test]
    fn leading_label_columns_align_left() {
        let header = strings(&["n", "variant", "value"]);
        let rows = vec![strings(&["1", "a", "10"]), strings(&["2", "long-name", "2"])];
        assert_eq!(
            grid_aligned(&header, &rows, 2, 100),
            "n  variant    value\n-  ---------  -----\n1  a             10\n2  long-name      2\n"
        );
    }

    #[test]
    fn a_grid_too_wide_splits_and_repeats_the_first_column() {
        let header = strings(&["case", "aaaaaaaa", "bbbbbbbb", "cccccccc"]);
        let rows = vec![strings(&["1", "10", "20", "30"])];
        let text = grid(&header, &rows, 24);
        assert!(text.lines().all(|l| width(l) <= 24), "{text}");
        assert_eq!(text.matches("case").count(), 2, "{text}");
        for name in ["aaaaaaaa", "bbbbbbbb", "cccccccc"] {
            assert_eq!(text.matches(name).count(), 1, "{text}");
        }
    }
}
