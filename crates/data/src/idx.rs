//! Reader for IDX files, the format of MNIST and Fashion-MNIST, plain or gzip-compressed.
//!
//! Layout: two zero bytes, the element type (`0x08` = unsigned byte, the only one supported),
//! the number of dimensions d, d big-endian u32 sizes, then the data row-major. Read as one
//! big-endian u32 the magic number is `0x00000803` for image files (`[N, rows, cols]`) and
//! `0x00000801` for label files (`[N]`). A file is accepted only if its data is exactly as long
//! as the header declares; truncated files, trailing bytes and damaged gzip streams (including
//! a bad CRC) are errors that name the file. Compression is detected from the gzip magic bytes,
//! not from the file name.

use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;

use crate::DataError;
use crate::records::MAX_SOURCE_VALUES;

/// The magic number of an IDX image file (unsigned bytes, 3 dimensions).
pub const IMAGES_MAGIC: u32 = 0x0000_0803;
/// The magic number of an IDX label file (unsigned bytes, 1 dimension).
pub const LABELS_MAGIC: u32 = 0x0000_0801;
/// The only supported element type: unsigned byte.
const TYPE_U8: u8 = 0x08;
/// Chunk size for streaming the data section.
const CHUNK: usize = 1 << 16;
/// Upper bound on what we reserve before seeing data, so a lying header cannot make us
/// allocate gigabytes up front (64 MiB of elements).
const MAX_RESERVE: usize = 1 << 26;

/// What an IDX file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdxKind {
    /// Images: dimensions `[N, rows, cols]`, magic `0x00000803`.
    Images,
    /// Labels: dimensions `[N]`, magic `0x00000801`.
    Labels,
}

impl IdxKind {
    fn magic(self) -> u32 {
        match self {
            IdxKind::Images => IMAGES_MAGIC,
            IdxKind::Labels => LABELS_MAGIC,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            IdxKind::Images => "an image file",
            IdxKind::Labels => "a label file",
        }
    }
}

/// The header of an IDX file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxHeader {
    /// Images or labels.
    pub kind: IdxKind,
    /// The dimension sizes: `[N, rows, cols]` or `[N]`.
    pub dims: Vec<usize>,
}

impl IdxHeader {
    /// Number of records (the first dimension).
    pub fn count(&self) -> usize {
        self.dims.first().copied().unwrap_or(0)
    }
}

/// The images of an IDX image file, as f32 in `[0, 1]` (pixel / 255).
#[derive(Debug, Clone, PartialEq)]
pub struct IdxImages {
    /// Number of images.
    pub n: usize,
    /// Rows per image.
    pub rows: usize,
    /// Columns per image.
    pub cols: usize,
    /// `n × rows × cols` pixels, row-major.
    pub pixels: Vec<f32>,
}

/// Reads only the header of an IDX file (fast: a few bytes, even from a gzip file).
///
/// # Errors
/// [`DataError::Io`] if the file cannot be opened; [`DataError::InvalidIdx`] for a bad magic
/// number, element type or dimension; [`DataError::CorruptGzip`] for a damaged gzip header.
pub fn read_header(path: &Path) -> Result<IdxHeader, DataError> {
    let mut reader = IdxReader::open(path)?;
    let header = reader.header(None);
    reader.diagnose(header)
}

/// Reads an image file: dimensions `[N, rows, cols]`, pixels scaled to `[0, 1]`.
///
/// # Errors
/// As [`read_header`], plus [`DataError::InvalidIdx`] for a label file or trailing data,
/// [`DataError::Truncated`] when the data is shorter than declared, and
/// [`DataError::CorruptGzip`] for a damaged stream or CRC.
pub fn read_images(path: &Path) -> Result<IdxImages, DataError> {
    let mut reader = IdxReader::open(path)?;
    let result = (|| {
        let header = reader.header(Some(IdxKind::Images))?;
        let (n, rows, cols) = (header.dims[0], header.dims[1], header.dims[2]);
        let len = reader.data_len(&header.dims)?;
        let mut pixels = Vec::with_capacity(len.min(MAX_RESERVE));
        reader.body(len, |chunk| {
            pixels.extend(chunk.iter().map(|&p| f32::from(p) / 255.0))
        })?;
        Ok(IdxImages {
            n,
            rows,
            cols,
            pixels,
        })
    })();
    reader.diagnose(result)
}

/// Reads a label file: dimensions `[N]`, one byte per label.
///
/// # Errors
/// As [`read_images`], with "image file" and "label file" swapped.
pub fn read_labels(path: &Path) -> Result<Vec<u8>, DataError> {
    let mut reader = IdxReader::open(path)?;
    let result = (|| {
        let header = reader.header(Some(IdxKind::Labels))?;
        let len = reader.data_len(&header.dims)?;
        let mut labels = Vec::with_capacity(len.min(MAX_RESERVE));
        reader.body(len, |chunk| labels.extend_from_slice(chunk))?;
        Ok(labels)
    })();
    reader.diagnose(result)
}

/// The most dimensions [`read_array`] accepts.
const MAX_DIMS: u8 = 8;

/// Reads an IDX file of unsigned bytes with any number of dimensions (1 to 8), as the IDX
/// format allows: its dimensions and data.
///
/// # Errors
/// As [`read_images`], for any number of dimensions.
pub fn read_array(path: &Path) -> Result<(Vec<usize>, Vec<u8>), DataError> {
    let mut reader = IdxReader::open(path)?;
    let result = (|| {
        let dims = reader.any_dims()?;
        let len = reader.data_len(&dims)?;
        let mut data = Vec::with_capacity(len.min(MAX_RESERVE));
        reader.body(len, |chunk| data.extend_from_slice(chunk))?;
        Ok((dims, data))
    })();
    reader.diagnose(result)
}

/// Reads `idx:IMAGES,LABELS`: an image file `[N, …]` of any shape (pixels scaled to [0, 1])
/// and a label file `[N]`.
///
/// # Errors
/// As [`read_array`], plus [`DataError::CountMismatch`] and [`DataError::InvalidIdx`] for a
/// label file that is not one-dimensional.
pub(crate) fn read_pair(
    images: &Path,
    labels: &Path,
) -> Result<crate::records::Records, DataError> {
    let (dims, pixels) = read_array(images)?;
    let (label_dims, y) = read_array(labels)?;
    if label_dims.len() != 1 {
        return Err(DataError::InvalidIdx {
            path: labels.to_path_buf(),
            reason: format!("labels must have one dimension, got {label_dims:?}"),
        });
    }
    if label_dims[0] != dims[0] {
        return Err(DataError::CountMismatch {
            images_path: images.to_path_buf(),
            images: dims[0],
            labels_path: labels.to_path_buf(),
            labels: label_dims[0],
        });
    }
    Ok(crate::records::Records {
        name: format!("idx:{}", images.display()),
        path: images.to_path_buf(),
        x: pixels.into_iter().map(crate::records::pixel).collect(),
        record_shape: crate::records::record_shape(&dims),
        labels: y.iter().map(u8::to_string).collect(),
        label_origin: None,
        pixels: true,
    })
}

/// A byte stream from an IDX file, decompressed if needed, that knows its path for errors.
struct IdxReader {
    path: PathBuf,
    gzip: bool,
    inner: Box<dyn Read>,
}

impl IdxReader {
    fn open(path: &Path) -> Result<Self, DataError> {
        let file = crate::open_regular(path, "an IDX file")?;
        let mut buffered = BufReader::with_capacity(CHUNK, file);
        let head = buffered.fill_buf().map_err(|e| DataError::io(path, e))?;
        let gzip = head.starts_with(&[0x1f, 0x8b]);
        let inner: Box<dyn Read> = if gzip {
            Box::new(BufReader::with_capacity(
                CHUNK,
                MultiGzDecoder::new(buffered),
            ))
        } else {
            Box::new(buffered)
        };
        Ok(Self {
            path: path.to_path_buf(),
            gzip,
            inner,
        })
    }

    /// A format error in a gzip file may be the symptom of a damaged stream (a flipped bit
    /// decodes to garbage before the CRC is reached): if the rest of the stream does not decode
    /// or fails its CRC, report the damage instead of the symptom. Header-only reads
    /// ([`read_header`]) are diagnosed too, at the cost of decoding the file on that error path.
    fn diagnose<T>(&mut self, result: Result<T, DataError>) -> Result<T, DataError> {
        match result {
            Err(e @ (DataError::InvalidIdx { .. } | DataError::Truncated { .. })) if self.gzip => {
                match std::io::copy(&mut self.inner, &mut std::io::sink()) {
                    Err(damage) => Err(DataError::CorruptGzip {
                        path: self.path.clone(),
                        detail: damage.to_string(),
                    }),
                    Ok(_) => Err(e),
                }
            }
            other => other,
        }
    }

    fn invalid(&self, reason: impl Into<String>) -> DataError {
        DataError::InvalidIdx {
            path: self.path.clone(),
            reason: reason.into(),
        }
    }

    /// Fills `buf` as far as the stream allows; returns how many bytes were read.
    fn read_full(&mut self, buf: &mut [u8]) -> Result<usize, DataError> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(k) => filled += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if self.gzip => {
                    return Err(DataError::CorruptGzip {
                        path: self.path.clone(),
                        detail: e.to_string(),
                    });
                }
                Err(e) => return Err(DataError::io(&self.path, e)),
            }
        }
        Ok(filled)
    }

    /// Reads a header of unsigned bytes with 1 to [`MAX_DIMS`] dimensions; returns them.
    fn any_dims(&mut self) -> Result<Vec<usize>, DataError> {
        let mut magic = [0u8; 4];
        if self.read_full(&mut magic)? < 4 || magic[..2] != [0, 0] || magic[2] != TYPE_U8 {
            return Err(self.invalid(format!(
                "expected the magic 0x0000 08 0D of unsigned bytes in D dimensions, got 0x{:08x}",
                u32::from_be_bytes(magic)
            )));
        }
        if !(1..=MAX_DIMS).contains(&magic[3]) {
            return Err(self.invalid(format!(
                "{} dimensions: 1 to {MAX_DIMS} are supported",
                magic[3]
            )));
        }
        self.dims(magic[3])
    }

    /// Reads `n` big-endian dimension sizes (every one after the first non-zero).
    fn dims(&mut self, n: u8) -> Result<Vec<usize>, DataError> {
        let mut dims = Vec::with_capacity(usize::from(n));
        for axis in 0..n {
            let mut size = [0u8; 4];
            if self.read_full(&mut size)? < 4 {
                return Err(self.invalid(format!("header ends inside dimension {axis}")));
            }
            let size = u32::from_be_bytes(size) as usize;
            if axis > 0 && size == 0 {
                return Err(self.invalid(format!("dimension {axis} is 0")));
            }
            dims.push(size);
        }
        Ok(dims)
    }

    /// Reads and checks the header; `want` is the kind the caller needs, if any.
    fn header(&mut self, want: Option<IdxKind>) -> Result<IdxHeader, DataError> {
        let mut magic = [0u8; 4];
        let got = self.read_full(&mut magic)?;
        if got < 4 {
            return Err(self.invalid(format!("file is {got} bytes long, too short for a header")));
        }
        let value = u32::from_be_bytes(magic);
        if magic[0] != 0 || magic[1] != 0 {
            return Err(self.invalid(format!(
                "bad magic number 0x{value:08x}: expected 0x{IMAGES_MAGIC:08x} (images) or \
                 0x{LABELS_MAGIC:08x} (labels)"
            )));
        }
        if magic[2] != TYPE_U8 {
            return Err(self.invalid(format!(
                "unsupported element type 0x{:02x} (magic 0x{value:08x}): only 0x08 (unsigned \
                 byte) is supported",
                magic[2]
            )));
        }
        let kind = match magic[3] {
            3 => IdxKind::Images,
            1 => IdxKind::Labels,
            d => {
                return Err(self.invalid(format!(
                    "unsupported number of dimensions {d} (magic 0x{value:08x}): expected 3 \
                     (images) or 1 (labels)"
                )));
            }
        };
        if let Some(want) = want.filter(|&w| w != kind) {
            return Err(self.invalid(format!(
                "magic number 0x{value:08x} marks {}, expected {} (magic 0x{:08x})",
                kind.describe(),
                want.describe(),
                want.magic()
            )));
        }
        let dims = self.dims(magic[3])?;
        Ok(IdxHeader { kind, dims })
    }

    /// The number of data bytes the dimensions declare.
    fn data_len(&self, dims: &[usize]) -> Result<usize, DataError> {
        let len = dims
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| self.invalid(format!("dimensions {dims:?} overflow")))?;
        // A small gzip file can inflate to any size its header declares: bounded first.
        if len as u64 > MAX_SOURCE_VALUES {
            return Err(DataError::TooLarge {
                path: self.path.clone(),
                reason: format!(
                    "dimensions {dims:?} declare {len} values, over the limit of \
                     {MAX_SOURCE_VALUES}"
                ),
            });
        }
        Ok(len)
    }

    /// Streams exactly `len` data bytes into `sink`, then checks that nothing follows.
    fn body(&mut self, len: usize, mut sink: impl FnMut(&[u8])) -> Result<(), DataError> {
        let mut buf = vec![0u8; CHUNK];
        let mut done = 0usize;
        while done < len {
            let want = (len - done).min(CHUNK);
            let got = self.read_full(&mut buf[..want])?;
            sink(&buf[..got]);
            done += got;
            if got < want {
                return Err(DataError::Truncated {
                    path: self.path.clone(),
                    expected: len as u64,
                    got: done as u64,
                });
            }
        }
        // Reading to the end also makes the gzip decoder check the CRC and length trailer.
        let mut extra = [0u8; 1];
        if self.read_full(&mut extra)? > 0 {
            return Err(self.invalid(format!(
                "trailing data after the {len} data bytes the header declares"
            )));
        }
        Ok(())
    }
}

/// Builders of small IDX files for tests in this crate.
#[cfg(test)]
pub(crate) mod testutil {
    use std::io::Write;

    use flate2::{Compression, write::GzEncoder};

    /// An IDX file with the given magic and dimensions and `data` as body.
    pub(crate) fn idx_bytes(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut out = magic.to_be_bytes().to_vec();
        for d in dims {
            out.extend_from_slice(&d.to_be_bytes());
        }
        out.extend_from_slice(data);
        out
    }

    /// `bytes`, gzip-compressed.
    pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(bytes).expect("write to Vec");
        enc.finish().expect("finish gzip")
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::{gzip, idx_bytes};
    use super::*;

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// Two 2×3 images with pixels 0, 51, …, 255 and the same reversed.
    fn two_images() -> Vec<u8> {
        let px: Vec<u8> = (0..6).map(|i| (i * 51) as u8).collect();
        let data: Vec<u8> = px.iter().copied().chain(px.iter().rev().copied()).collect();
        idx_bytes(IMAGES_MAGIC, &[2, 2, 3], &data)
    }

    #[test]
    fn reads_images_plain_and_gzip() {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in [("a", two_images()), ("b.gz", gzip(&two_images()))] {
            let img = read_images(&write(dir.path(), name, &bytes)).unwrap();
            assert_eq!((img.n, img.rows, img.cols), (2, 2, 3));
            assert_eq!(img.pixels.len(), 12);
            assert_eq!(img.pixels[0], 0.0);
            assert_eq!(img.pixels[5], 1.0);
            assert!((img.pixels[1] - 0.2).abs() < 1e-7);
            assert_eq!(img.pixels[6], 1.0);
        }
    }

    #[test]
    fn reads_labels_and_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "l.gz",
            &gzip(&idx_bytes(LABELS_MAGIC, &[4], &[3, 1, 4, 1])),
        );
        assert_eq!(read_labels(&path).unwrap(), vec![3, 1, 4, 1]);
        let h = read_header(&path).unwrap();
        assert_eq!((h.kind, h.count()), (IdxKind::Labels, 4));
    }

    #[test]
    fn truncated_files_are_reported_with_lengths() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = two_images();
        bytes.truncate(bytes.len() - 5);
        for (name, b) in [("t", bytes.clone()), ("t.gz", gzip(&bytes))] {
            let path = write(dir.path(), name, &b);
            match read_images(&path) {
                Err(DataError::Truncated {
                    expected: 12,
                    got: 7,
                    path: p,
                }) => assert_eq!(p, path),
                other => panic!("{other:?}"),
            }
        }
        // A gzip file cut short is a damaged stream, named as such.
        let gz = gzip(&two_images());
        let path = write(dir.path(), "cut.gz", &gz[..gz.len() - 6]);
        let err = read_images(&path).unwrap_err();
        assert!(
            matches!(
                err,
                DataError::CorruptGzip { .. } | DataError::Truncated { .. }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("cut.gz"), "{err}");
    }

    #[test]
    fn corrupt_gzip_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut gz = gzip(&two_images());
        let mid = gz.len() / 2;
        gz[mid] ^= 0xff;
        let n = gz.len();
        gz[n - 8] ^= 0xff; // and the CRC, so even a lucky deflate decode fails
        let path = write(dir.path(), "bad.gz", &gz);
        let err = read_images(&path).unwrap_err();
        assert!(matches!(err, DataError::CorruptGzip { .. }), "{err}");
        assert!(err.to_string().contains("bad.gz"), "{err}");
    }

    #[test]
    fn bad_magic_type_and_dims_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            (
                "magic",
                idx_bytes(0x0102_0803, &[1, 1, 1], &[0]),
                "bad magic number 0x01020803",
            ),
            (
                "type",
                idx_bytes(0x0000_0d03, &[1, 1, 1], &[0; 4]),
                "element type 0x0d",
            ),
            (
                "ndim",
                idx_bytes(0x0000_0802, &[1, 1], &[0]),
                "number of dimensions 2",
            ),
            (
                "labels",
                idx_bytes(LABELS_MAGIC, &[1], &[0]),
                "marks a label file",
            ),
            (
                "zero",
                idx_bytes(IMAGES_MAGIC, &[1, 0, 28], &[]),
                "dimension 1 is 0",
            ),
            ("short", vec![0, 0, 8], "3 bytes long"),
            (
                "hdr",
                idx_bytes(IMAGES_MAGIC, &[1], &[]),
                "header ends inside dimension 1",
            ),
            (
                "trail",
                idx_bytes(IMAGES_MAGIC, &[1, 1, 1], &[0, 9]),
                "trailing data",
            ),
        ];
        for (name, bytes, want) in cases {
            let path = write(dir.path(), name, &bytes);
            let err = read_images(&path).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, DataError::InvalidIdx { .. }), "{name}: {msg}");
            assert!(msg.contains(want) && msg.contains(name), "{name}: {msg}");
        }
        let path = write(dir.path(), "img", &two_images());
        assert!(
            read_labels(&path)
                .unwrap_err()
                .to_string()
                .contains("marks an image file")
        );
    }

    #[test]
    fn missing_file_is_an_io_error_naming_it() {
        let err = read_images(Path::new("/nonexistent/x-idx3-ubyte")).unwrap_err();
        assert!(matches!(err, DataError::Io { .. }));
        assert!(err.to_string().contains("/nonexistent/x-idx3-ubyte"));
    }

    #[test]
    fn declared_sizes_over_the_limit_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        // 2^14 images of 2^7 x 2^7 pixels: 2^28 values declared in a 20-byte gzip file.
        let p = write(
            dir.path(),
            "big.idx.gz",
            &gzip(&idx_bytes(IMAGES_MAGIC, &[1 << 14, 1 << 7, 1 << 7], &[])),
        );
        for e in [read_images(&p).unwrap_err(), read_array(&p).unwrap_err()] {
            assert!(matches!(e, DataError::TooLarge { .. }), "{e}");
            assert!(e.to_string().contains("over the limit"), "{e}");
        }
    }
}
