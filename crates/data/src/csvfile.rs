//! Reader for the user's own CSV files (`csv:PATH`).
//!
//! The first row is a header naming the columns. One column is the class label (chosen by
//! name, default the last column); it may hold numbers or strings. Every other column must be
//! numeric: an empty, non-numeric, NaN or infinite cell is an error naming its line (1-based,
//! counting the header as line 1, as an editor does) and column. Cells are trimmed. Fields are
//! separated by a comma or the declared delimiter (`--delimiter`, schema key `delimiter`), and a
//! gzip-compressed file (`data.csv.gz`, told by its magic bytes) is read as it inflates.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use csv::{ErrorKind, ReaderBuilder, StringRecord, Trim};

use crate::rows::Rows;
use crate::tabular::Columns;
use crate::{DataError, Schema};

/// The largest CSV file read (1 GiB: far above any tabular data set DP-SGD can train on here).
pub const MAX_CSV_BYTES: u64 = 1 << 30;

/// The longest CSV line read (1 MiB: over 50 000 numeric columns).
pub const MAX_CSV_LINE_BYTES: usize = 1 << 20;

/// Reads `path`, taking `label_column` (default: the last column) as the label. With declared
/// `classes` each label maps to its declared class (equal as text or as a number), and a label
/// outside them is refused; without, the classes are the distinct labels present (sorted), a
/// domain read off the records that only non-private computations may use.
///
/// # Errors
/// [`DataError::Io`] if the file cannot be read; [`DataError::EmptyCsv`] without a header;
/// [`DataError::NoRows`] with a header only; [`DataError::DuplicateColumn`];
/// [`DataError::UnknownColumn`] for a label column that is not in the header;
/// [`DataError::Csv`] for rows with the wrong number of fields or invalid UTF-8;
/// [`DataError::MissingValue`] / [`DataError::NonNumeric`] for bad feature cells;
/// [`DataError::UndeclaredLabel`] for a label outside the declared classes (a number outside a
/// declared `label_range` is clamped into it instead);
/// [`DataError::TooLarge`] for a file over [`MAX_CSV_BYTES`] or a line over
/// [`MAX_CSV_LINE_BYTES`].
pub(crate) fn read_csv(path: &Path, schema: &Schema) -> Result<Columns, DataError> {
    read_csv_within(path, schema, MAX_CSV_BYTES)
}

/// [`read_csv`] with at most `limit` bytes in the file and in what it inflates to.
fn read_csv_within(path: &Path, schema: &Schema, limit: u64) -> Result<Columns, DataError> {
    let file = crate::open_regular(path, "a CSV table")?;
    // The opened file's own size (no race with a later swap of the path): the columns read
    // from it take several times its size in memory.
    let size = file.metadata().map_err(|e| DataError::io(path, e))?.len();
    if size > limit {
        return Err(DataError::TooLarge {
            path: path.to_path_buf(),
            reason: format!("the file is {size} bytes, over the limit of {limit}"),
        });
    }
    let mut file = BufReader::new(file);
    let head = file.fill_buf().map_err(|e| DataError::io(path, e))?;
    // Compression is told by the gzip magic bytes, whatever the file's name.
    let file: Box<dyn Read> = if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    // Bounds a file that grows while it is read, and what a gzip file inflates to: past the
    // limit the read fails (a table cut short would be read without a word).
    let file = Bounded {
        inner: file,
        left: limit,
        limit,
    };
    let mut reader = ReaderBuilder::new()
        .delimiter(schema.delimiter.unwrap_or(b','))
        .has_headers(true)
        .flexible(false)
        .trim(Trim::All)
        .from_reader(file);
    let header = reader.headers().map_err(|e| csv_error(path, e))?;
    if header.as_slice().len() > MAX_CSV_LINE_BYTES {
        // Refused before any name is used: messages quote the header's names.
        return Err(DataError::TooLarge {
            path: path.to_path_buf(),
            reason: format!(
                "the header holds {} bytes, over the limit of {MAX_CSV_LINE_BYTES} per line",
                header.as_slice().len()
            ),
        });
    }
    let names: Vec<String> = header.iter().map(str::to_string).collect();
    if names.is_empty() || (names.len() == 1 && names[0].is_empty()) {
        return Err(DataError::EmptyCsv {
            path: path.to_path_buf(),
        });
    }
    let mut rows = Rows::new(path, schema, names)?;
    let mut record = StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(csv_error(path, e)),
        }
        let line = record.position().map_or(0, csv::Position::line);
        if record.as_slice().len() > MAX_CSV_LINE_BYTES {
            return Err(DataError::TooLarge {
                path: path.to_path_buf(),
                reason: format!(
                    "line {line} holds {} bytes, over the limit of {MAX_CSV_LINE_BYTES} per line",
                    record.as_slice().len()
                ),
            });
        }
        rows.push(line, record.iter())?;
    }
    rows.finish(format!("csv:{}", path.display()))
}

/// A reader of at most `limit` bytes that fails, rather than ends, when its source holds more.
struct Bounded<R> {
    inner: R,
    left: u64,
    limit: u64,
}

/// The error a [`Bounded`] reader fails with: the limit, in bytes.
#[derive(Debug)]
struct OverLimit(u64);

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the data (decompressed, for a gzip file) is over the limit of {} bytes; nothing \
             was read from a table cut short",
            self.0
        )
    }
}

impl std::error::Error for OverLimit {}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            // At the limit: the data ends here, or it is too long.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(std::io::Error::other(OverLimit(self.limit))),
            };
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let got = self.inner.read(&mut buf[..want])?;
        self.left -= got as u64;
        Ok(got)
    }
}

/// Converts a csv crate error into a [`DataError`] that names the file and line.
pub(crate) fn csv_error(path: &Path, e: csv::Error) -> DataError {
    let line = e.position().map_or(0, csv::Position::line);
    let reason = match e.kind() {
        ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => {
            format!("row has {len} fields but the header has {expected_len}")
        }
        ErrorKind::Utf8 { err, .. } => format!("invalid UTF-8 in field {}", err.field() + 1),
        _ => e.to_string(),
    };
    match e.into_kind() {
        ErrorKind::Io(source) => match source.get_ref().and_then(|e| e.downcast_ref::<OverLimit>())
        {
            Some(over) => DataError::TooLarge {
                path: path.to_path_buf(),
                reason: over.to_string(),
            },
            None => DataError::io(path, source),
        },
        _ => DataError::Csv {
            path: path.to_path_buf(),
            line,
            reason,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn write(dir: &Path, text: &[u8]) -> PathBuf {
        let path = dir.join("t.csv");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn reads_features_and_string_labels() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            b"a, b ,species\n1,2,cat\n3.5, -4 ,dog\n5,6,cat\n",
        );
        let c = read_csv(&p, &Schema::default()).unwrap();
        assert_eq!(c.names, vec!["a", "b", "species"]);
        assert_eq!(c.class_names, vec!["cat", "dog"]);
        assert_eq!(c.y, vec![0, 1, 0]);
        let d = c.clone().into_dataset(&p).unwrap();
        assert_eq!((d.n, d.n_features(), d.n_classes), (3, 2, 2));
        assert_eq!(d.x, vec![1.0, 2.0, 3.5, -4.0, 5.0, 6.0]);
        assert_eq!(d.feature_range, None);
        let t = c.into_table();
        assert_eq!(t.column("b").unwrap(), &[2.0, -4.0, 6.0]);
        assert_eq!(t.column("species").unwrap(), &[0.0, 1.0, 0.0]);
    }

    fn labelled(column: &str) -> Schema {
        Schema {
            label_column: Some(column.into()),
            ..Schema::default()
        }
    }

    #[test]
    fn categories_and_fill_values() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Schema {
            categories: vec![("c".into(), vec!["red".into(), "green".into()])],
            fills: vec![("a".into(), -1.0)],
            ..Schema::default()
        };
        let p = write(dir.path(), b"a,c,y\n1,green,x\n,red,x\n");
        let c = read_csv(&p, &schema).unwrap();
        assert_eq!(c.values[0], vec![1.0, -1.0]);
        assert_eq!(c.values[1], vec![1.0, 0.0]);
        let p = write(dir.path(), b"a,c,y\n1,green,x\n2,blue,x\n");
        let msg = read_csv(&p, &schema).unwrap_err().to_string();
        assert!(
            msg.contains(
                "line 3, column \"c\": \"blue\" is not one of the declared categories (red, green)"
            ),
            "{msg}"
        );
        let p = write(dir.path(), b"a,c,y\n1,,x\n");
        let msg = read_csv(&p, &schema).unwrap_err().to_string();
        assert!(msg.contains("column \"c\": missing value"), "{msg}");
    }

    #[test]
    fn data_over_the_limit_is_refused_not_cut() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from("a,y\n");
        for i in 0..400 {
            text.push_str(&format!("{i},{}\n", i % 2));
        }
        let gz = crate::idx::testutil::gzip(text.as_bytes());
        let p = dir.path().join("t.csv.gz");
        std::fs::write(&p, &gz).unwrap();
        let limit = text.len() as u64 - 1;
        assert!((gz.len() as u64) < limit);
        let e = read_csv_within(&p, &Schema::default(), limit).unwrap_err();
        assert!(matches!(e, DataError::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("over the limit"), "{e}");
        // Exactly at the limit, every row is read.
        let all = read_csv_within(&p, &Schema::default(), text.len() as u64).unwrap();
        assert_eq!(all.into_table().values[0].len(), 400);
        // Plain files too, with the header itself cut from messages.
        let plain = write(dir.path(), text.as_bytes());
        let e = read_csv_within(&plain, &Schema::default(), limit).unwrap_err();
        assert!(matches!(e, DataError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn a_huge_header_is_refused_without_echoing_it() {
        let dir = tempfile::tempdir().unwrap();
        let name = "n".repeat(MAX_CSV_LINE_BYTES + 10);
        let p = write(dir.path(), format!("{name},y\n1,2\n").as_bytes());
        let msg = read_csv(&p, &Schema::default()).unwrap_err().to_string();
        assert!(
            msg.contains("header") && msg.len() < 300,
            "{}",
            &msg[..300.min(msg.len())]
        );
        // A long name under the limit is cut wherever a message quotes it.
        let name = "m".repeat(5000);
        let p = write(dir.path(), format!("{name},{name},y\n1,2,3\n").as_bytes());
        let msg = read_csv(&p, &Schema::default()).unwrap_err().to_string();
        assert!(msg.contains("more than once") && msg.len() < 300, "{msg}");
    }

    #[test]
    fn gzip_and_other_delimiters() {
        let dir = tempfile::tempdir().unwrap();
        let gz = crate::idx::testutil::gzip(b"a;b;y\n1;2;x\n3;4;z\n");
        let p = dir.path().join("t.csv.gz");
        std::fs::write(&p, gz).unwrap();
        let c = read_csv(&p, &Schema::default().with_delimiter(";").unwrap()).unwrap();
        assert_eq!(c.names, vec!["a", "b", "y"]);
        assert_eq!(c.values[1], vec![2.0, 4.0]);
        let p = write(dir.path(), b"a\tb\n1\tx\n");
        assert_eq!(
            read_csv(&p, &Schema::default().with_delimiter("\\t").unwrap())
                .unwrap()
                .values[0],
            vec![1.0]
        );
    }

    #[test]
    fn label_column_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), b"y,a,b\n2,1,2\n7,3,4\n");
        let d = read_csv(&p, &labelled("y"))
            .unwrap()
            .into_dataset(&p)
            .unwrap();
        assert_eq!(d.feature_names, vec!["a", "b"]);
        assert_eq!(d.class_names, vec!["2", "7"]);
        assert_eq!(d.x, vec![1.0, 2.0, 3.0, 4.0]);
        let msg = read_csv(&p, &labelled("z")).unwrap_err().to_string();
        assert!(
            msg.contains("\"z\"") && msg.contains("\"y\", \"a\", \"b\""),
            "{msg}"
        );
    }

    #[test]
    fn bad_files_name_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let cases: [(&[u8], &str); 9] = [
            (b"", "empty file"),
            (b"a,b,y\n", "no data rows"),
            (
                b"a,b,y\n1,2,x\n1,oops,x\n",
                "line 3, column \"b\": \"oops\" is not a number",
            ),
            (b"a,b,y\n1,,x\n", "line 2, column \"b\": missing value"),
            (b"a,b,y\n1,2,\n", "line 2, column \"y\": missing value"),
            (
                b"a,b,y\n1,2,x\n1,2\n",
                "line 3: row has 2 fields but the header has 3",
            ),
            (b"a,a,y\n1,2,x\n", "column \"a\" appears more than once"),
            (
                b"a,b,y\n1,NaN,x\n",
                "line 2, column \"b\": \"NaN\" is not finite",
            ),
            (b"a,y\n1,x\n\xff,x\n", "line 3: invalid UTF-8"),
        ];
        for (text, want) in cases {
            let p = write(dir.path(), text);
            let msg = read_csv(&p, &Schema::default()).unwrap_err().to_string();
            assert!(
                msg.contains(want) && msg.contains("t.csv"),
                "want {want:?}, got {msg}"
            );
        }
        let p = write(dir.path(), b"y\n1\n");
        let msg = read_csv(&p, &Schema::default())
            .unwrap()
            .into_dataset(&p)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("no feature columns"), "{msg}");
        let missing = read_csv(Path::new("/nonexistent/x.csv"), &Schema::default()).unwrap_err();
        assert!(missing.to_string().contains("/nonexistent/x.csv"));
    }
}
