//! Text grids for the terminal, drawn by `comfy-table`: a header row, a
//! rule, then the rows; the first column (or the first few) left-aligned
//! (labels), the others right-aligned (numbers), two spaces between
//! columns, no borders.
//!
//! A grid never exceeds the width it is given: when its columns do not fit,
//! comfy-table wraps the widest cells onto more lines.

use comfy_table::{CellAlignment, ContentArrangement, ContentLineStyle, LineStyle, TableStyle};

/// No borders; a space (after each column's one of padding) between
/// columns; a rule of `-` under the header.
const STYLE: TableStyle = TableStyle::new()
    .header_lines(ContentLineStyle::none().junction(' '))
    .header_separator(LineStyle::none().fill('-').junction(' '))
    .content_lines(ContentLineStyle::none().junction(' '));

/// `header` and `rows` (each as long as `header`) as text no wider than
/// `max_width` columns, the first `left` columns left-aligned. Every line
/// ends with `\n`, trailing spaces trimmed.
pub fn grid(header: &[String], rows: &[Vec<String>], left: usize, max_width: usize) -> String {
    let mut table = comfy_table::Table::new();
    table.load_style(STYLE).set_header(header).add_rows(rows);
    match u16::try_from(max_width) {
        Ok(width) => table
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(width),
        Err(_) => table.set_content_arrangement(ContentArrangement::Disabled),
    };
    for (i, column) in table.column_iter_mut().enumerate() {
        column.set_padding((u16::from(i > 0), 0));
        if i >= left {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
        .lines()
        .map(|l| l.trim_end().to_string() + "\n")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::wrap::width;

    fn strings(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn columns_align_under_the_widest_cell() {
        let text = grid(
            &strings(&["n", "value"]),
            &[strings(&["512", "1.5"])],
            1,
            100,
        );
        assert_eq!(text, "n    value\n--- ------\n512    1.5\n");
    }

    #[test]
    fn leading_label_columns_align_left() {
        let header = strings(&["n", "variant", "value"]);
        let rows = vec![
            strings(&["1", "a", "10"]),
            strings(&["2", "long-name", "2"]),
        ];
        assert_eq!(
            grid(&header, &rows, 2, 100),
            "n  variant    value\n- ---------- ------\n1  a             10\n2  long-name      2\n"
        );
    }

    #[test]
    fn a_grid_too_wide_wraps_within_the_width() {
        let header = strings(&["case", "aaaaaaaa", "bbbbbbbb", "cccccccc"]);
        let rows = vec![strings(&["1", "10 ±1%", "20 ±1%", "30 ±1%"])];
        let text = grid(&header, &rows, 1, 24);
        assert!(text.lines().all(|l| width(l) <= 24), "{text}");
        for value in ["10", "20", "30"] {
            assert_eq!(text.matches(value).count(), 1, "{text}");
        }
    }
}
