//! [`Pager`]: serve a file lazily, page by page, with fault-around.
//!
//! Writes a 4 MiB (and a bit) file to the temp directory, maps a region over
//! it with a `Pager` whose handler threads fill each page on first access
//! from the file, and reads the region back from four threads, checking
//! every byte (and the zeros past the file's end). It does this twice: with
//! the default 64 KiB fault-around window, where one fault fills a window of
//! pages the page cache holds (seed 002), and with fault-around off, one page
//! per fault. The stats show the difference in faults.
//!
//! Needs userfaultfd: run as root, or see the error printed otherwise.
//!
//! ```sh
//! cargo run --release -p herdless-pager --example lazy_file
//! ```

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::thread;

use herdless_pager::{FileSource, HandlerMode, Pager, PagerStats, DEFAULT_FAULT_AROUND};

const FILE_LEN: usize = (4 << 20) + 1000;
const READERS: usize = 4;
const CHUNK: usize = 4096;

/// Deletes the file when dropped, on success and on error alike.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn byte_at(i: usize) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// Maps `path` with a fault-around window of `window` bytes (one page:
/// off), reads and checks every byte from `READERS` threads; returns the
/// pager's counters and the page size.
fn serve(path: &Path, window: usize) -> Result<(PagerStats, usize), Box<dyn Error>> {
    // A region length must be a page multiple: round up to 64 KiB, which
    // every Linux page size divides. Past the file's end it reads zeros.
    let region = FILE_LEN.next_multiple_of(64 << 10);
    let pager = Pager::builder(region)
        .source(FileSource::open(path)?)
        .fault_around(window)
        .handlers(2)
        .mode(HandlerMode::BlockingRead)
        .build()?;
    thread::scope(|s| -> Result<(), Box<dyn Error>> {
        let pager = &pager;
        let readers: Vec<_> = (0..READERS)
            .map(|r| {
                s.spawn(move || -> Result<(), String> {
                    let mut buf = [0u8; CHUNK];
                    // Reader r takes chunks r, r + READERS, ...: interleaved.
                    for offset in (r * CHUNK..region).step_by(READERS * CHUNK) {
                        pager.read(offset, &mut buf).map_err(|e| e.to_string())?;
                        for (at, &got) in (offset..).zip(&buf) {
                            let want = if at < FILE_LEN { byte_at(at) } else { 0 };
                            if got != want {
                                return Err(format!("byte {at:#x} is {got:#x}, not {want:#x}"));
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for reader in readers {
            reader.join().map_err(|_| "a reader panicked")??;
        }
        Ok(())
    })?;
    pager.settle();
    if let Some(e) = pager.take_errors().into_iter().next() {
        return Err(e.into());
    }
    Ok((pager.stats(), pager.page_size()))
}

fn report(name: &str, st: &PagerStats) {
    println!(
        "  {name:<19} {:>5} faults, {:>4} pages on demand, {:>4} by fault-around, {:>2} zero pages: \
         {:.1} pages per fault, p50 service {:?}",
        st.faults,
        st.pages_on_demand,
        st.pages_fault_around,
        st.zero_pages,
        st.pages_per_fault(),
        st.latency.p50
    );
}

fn run() -> Result<(), Box<dyn Error>> {
    let file = TempFile(
        std::env::temp_dir().join(format!("herdless-lazy-file-{}.bin", std::process::id())),
    );
    std::fs::write(&file.0, (0..FILE_LEN).map(byte_at).collect::<Vec<u8>>())?;
    println!(
        "{} bytes in {}, read by {READERS} threads through the pager:",
        FILE_LEN,
        file.0.display()
    );
    let (around, page) = serve(&file.0, DEFAULT_FAULT_AROUND)?;
    report("fault-around 64 KiB", &around);
    let (off, _) = serve(&file.0, page)?;
    report("fault-around off", &off);
    println!("every byte matched the file (and zeros past its end)");
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lazy_file: {e}");
            ExitCode::FAILURE
        }
    }
}
