//! The HTML report rendered by a real browser: the smoke suite writes
//! `--json` and `--report`, headless Chromium (Debian's `chromium`,
//! installed here if missing and we may) loads `index.html` and dumps the
//! DOM it built, and every chart and every table the results call for must
//! be in it, by id, with its content.
//!
//! Without Chromium, and no way to install it, the test fails saying so.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use herdless_lab::harness::Report;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("herdless-lab-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The smoke suite's results and report, written once for every test here.
struct Fixture {
    report: Report,
    html: PathBuf,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = scratch("report");
        let json = dir.join("results.json");
        let html_dir = dir.join("html");
        let out = Command::new(env!("CARGO_BIN_EXE_herdless-lab"))
            .args(["all", "--smoke", "--json"])
            .arg(&json)
            .arg("--report")
            .arg(&html_dir)
            .output()
            .expect("the lab binary runs");
        // Exit status 1 only says a measurement failed: the report is
        // written all the same, and shows it.
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Fixture { report: Report::read_json(&json).unwrap(), html: html_dir.join("index.html") }
    })
}

/// The Chromium binary: on PATH, or installed with apt-get when we are
/// root and have it. Panics with the reason otherwise: this test must not
/// pass without a browser.
fn chromium() -> PathBuf {
    static CHROMIUM: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    CHROMIUM
        .get_or_init(|| {
            if let Some(found) = on_path(&["chromium", "chromium-browser"]) {
                return Ok(found);
            }
            // SAFETY: geteuid has no preconditions.
            let root = unsafe { libc::geteuid() } == 0;
            if !root || on_path(&["apt-get"]).is_none() {
                return Err("chromium is not installed and cannot be installed here \
                            (needs root and apt-get): apt-get install chromium"
                    .into());
            }
            for args in [&["update", "-qq"][..], &["install", "-y", "-qq", "chromium"]] {
                let status = Command::new("apt-get")
                    .args(args)
                    .env("DEBIAN_FRONTEND", "noninteractive")
                    .stdout(Stdio::null())
                    .status()
                    .map_err(|e| format!("apt-get {args:?}: {e}"))?;
                if !status.success() {
                    return Err(format!("apt-get {args:?} failed: {status}"));
                }
            }
            on_path(&["chromium"]).ok_or_else(|| "apt-get installed no chromium binary".into())
        })
        .clone()
        .unwrap_or_else(|why| panic!("the report test needs headless Chromium: {why}"))
}

fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

/// The DOM Chromium builds from `page`, serialised (`--dump-dom`).
fn rendered_dom(page: &Path) -> String {
    let dir = scratch("chromium");
    let (stdout, stderr) = (dir.join("dom.html"), dir.join("stderr.txt"));
    let mut child = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let dom = std::fs::read_to_string(&stdout).unwrap();
    assert!(
        status.success() && dom.contains("</html>"),
        "chromium failed ({status}): {}",
        std::fs::read_to_string(&stderr).unwrap_or_default()
    );
    let _ = std::fs::remove_dir_all(dir);
    dom
}

/// The element whose opening tag carries `id="<id>"`, up to its closing
/// tag (the report nests no element in one of its own kind).
fn element<'d>(dom: &'d str, id: &str) -> Option<&'d str> {
    let at = dom.find(&format!(" id=\"{id}\""))?;
    let open = dom[..at].rfind('<')?;
    let tag: String = dom[open + 1..].chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
    let close = format!("</{tag}>");
    let end = open + dom[open..].find(&close)? + close.len();
    Some(&dom[open..end])
}

/// The trimmed contents of the `<text>` elements in `svg`.
fn texts(svg: &str) -> Vec<&str> {
    svg.split("</text>")
        .filter_map(|piece| {
            let open = piece.rfind("<text")?;
            let body = &piece[open..];
            Some(body[body.find('>')? + 1..].trim())
        })
        .collect()
}

/// Checks `dom` holds every chart and table `report` calls for: per
/// section a `<figure>` with an `<svg>` that draws a line and names every
/// variant with a value, one table per measured metric with a header row
/// naming every variant and one row per case, and the paragraph; no more
/// charts or tables than that.
fn check(dom: &str, report: &Report) -> Result<(), String> {
    let mut charts = 0;
    let mut tables = 1; // the summary
    for e in &report.experiments {
        if element(dom, &format!("exp-{}", e.name)).is_none() {
            return Err(format!("no section for experiment {}", e.name));
        }
        for (i, s) in e.sections.iter().enumerate() {
            let primary = &s.primary().name;
            let drawn: Vec<&str> = s
                .variants
                .iter()
                .filter(|v| (0..s.cases.len()).any(|c| s.median(c, &v.name, primary) > Some(0.0)))
                .map(|v| v.name.as_str())
                .collect();
            if !drawn.is_empty() {
                charts += 1;
                let id = format!("chart-{}-s{i}", e.name);
                let fig = element(dom, &id).ok_or(format!("chart {id} missing"))?;
                if !(fig.contains("<svg") && fig.contains("</svg>") && fig.contains("<polyline")) {
                    return Err(format!("chart {id} has no drawn SVG"));
                }
                let labels = texts(fig);
                for v in &drawn {
                    if !labels.iter().any(|t| t == v) {
                        return Err(format!("chart {id} does not name variant {v}"));
                    }
                }
            }
            for (m, metric) in s.metrics.iter().enumerate() {
                if m > 0 && !s.measured(&metric.name) {
                    continue;
                }
                tables += 1;
                let id = format!("table-{}-s{i}-{}", e.name, metric.name);
                let table = element(dom, &id).ok_or(format!("table {id} missing"))?;
                let rows = table.matches("<tr>").count();
                if rows != s.cases.len() + 1 {
                    return Err(format!("table {id}: {rows} rows for {} cases", s.cases.len()));
                }
                for v in &s.variants {
                    if !table.contains(&format!(">{}</th>", v.name)) {
                        return Err(format!("table {id} has no column {}", v.name));
                    }
                }
            }
        }
    }
    let sections: usize = report.experiments.iter().map(|e| e.sections.len()).sum();
    let found = |needle: &str| dom.matches(needle).count();
    match (found("<svg"), found("<table"), found("class=\"finding\"")) {
        (svg, table, para) if svg == charts && table == tables && para == sections => Ok(()),
        (svg, table, para) => Err(format!(
            "{svg} charts, {table} tables, {para} paragraphs; expected {charts}, {tables}, {sections}"
        )),
    }
}

#[test]
fn chromium_renders_every_chart_and_table_of_the_smoke_report() {
    let f = fixture();
    let dom = rendered_dom(&f.html);
    check(&dom, &f.report).unwrap();
    for e in &f.report.experiments {
        assert!(!e.claim.is_empty(), "{}: no claim", e.name);
    }
    assert!(dom.contains("What the seed claimed"));
}

#[test]
fn the_page_is_self_contained() {
    let page = std::fs::read_to_string(&fixture().html).unwrap();
    for banned in ["<script", "<link", "<img", "<iframe", "src=", "@import", "url("] {
        assert!(!page.contains(banned), "{banned} in the report");
    }
    let external = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "").contains("://");
    assert!(!external, "an external URL in the report");
}

#[test]
fn the_check_fails_when_a_chart_or_a_table_is_missing() {
    let f = fixture();
    let page = std::fs::read_to_string(&f.html).unwrap();
    check(&page, &f.report).unwrap();
    let e = &f.report.experiments[0].name;
    let table = element(
        &page,
        &format!("table-{e}-s0-{}", f.report.experiments[0].sections[0].primary().name),
    )
    .unwrap();
    let err = check(&page.replacen(table, "", 1), &f.report).unwrap_err();
    assert!(err.contains("missing"), "{err}");
    let chart = element(&page, &format!("chart-{e}-s0")).unwrap();
    let err = check(&page.replacen(chart, "", 1), &f.report).unwrap_err();
    assert!(err.contains(&format!("chart chart-{e}-s0 missing")), "{err}");
    // A stray extra chart is caught by the count.
    let svg_start = chart.find("<svg").unwrap();
    let extra = page.replacen("</body>", &format!("{}</body>", &chart[svg_start..]), 1);
    assert!(check(&extra, &f.report).is_err());
}
