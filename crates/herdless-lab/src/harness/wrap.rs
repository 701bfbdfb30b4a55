//! Fitting text into a terminal of [`WIDTH`] columns: long lines (seed
//! titles, verdicts, legends, errors) wrap at spaces with a hanging indent
//! (`textwrap`, first fit, words never split at their hyphens).
//!
//! Widths count characters, not bytes (`µ`, `×`, `≥` are one column each).

/// The widest line the lab prints on stdout.
pub const WIDTH: usize = 100;

/// The width of `text` in columns (characters).
pub fn width(text: &str) -> usize {
    text.chars().count()
}

/// `text` wrapped to `width` columns: the first line starts with `first`,
/// the following ones with `rest`; breaks at spaces (runs of white space,
/// line breaks included, count as one), and inside a word only when the
/// word alone is wider than a line. Every line ends with `\n`.
pub fn wrap(text: &str, first: &str, rest: &str, width: usize) -> String {
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let options = textwrap::Options::new(width)
        .initial_indent(first)
        .subsequent_indent(rest)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    textwrap::fill(&words, options) + "\n"
}

/// [`wrap`] at [`WIDTH`]: the first line keeps `text`'s leading spaces,
/// the others are indented by `indent` spaces.
pub fn para(text: &str, indent: usize) -> String {
    let body = text.trim_start_matches(' ');
    let first = &text[..text.len() - body.len()];
    wrap(body, first, &" ".repeat(indent), WIDTH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_stays_on_one_line() {
        assert_eq!(wrap("a b c", "", "  ", 10), "a b c\n");
    }

    #[test]
    fn long_text_breaks_at_spaces_with_a_hanging_indent() {
        let text = wrap("one two three four five", "> ", "  ", 12);
        assert_eq!(text, "> one two\n  three four\n  five\n");
        assert!(text.lines().all(|l| width(l) <= 12));
    }

    #[test]
    fn a_paragraph_keeps_its_leading_spaces_on_the_first_line() {
        let text = para(&format!("  {}", "word ".repeat(30)), 4);
        assert!(text.starts_with("  word word"), "{text}");
        assert!(text.lines().skip(1).all(|l| l.starts_with("    word")), "{text}");
        assert!(text.lines().all(|l| width(l) <= WIDTH), "{text}");
    }

    #[test]
    fn a_word_wider_than_the_line_is_cut() {
        let text = wrap("abcdefghij", "", "", 4);
        assert_eq!(text, "abcd\nefgh\nij\n");
    }

    #[test]
    fn hyphenated_names_are_not_split() {
        assert_eq!(wrap("x wake-one", "", "", 8), "x\nwake-one\n");
    }

    #[test]
    fn width_counts_characters_not_bytes() {
        assert_eq!(width("≥ 1.5× µs"), 9);
        let text = wrap(&"µ×≥ ".repeat(40), "", "", 20);
        assert!(text.lines().all(|l| width(l) <= 20), "{text}");
    }
}
