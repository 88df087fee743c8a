//! NumPy inputs: `npy:FEATURES.npy,LABELS.npy` (two `.npy` files) and `npz:FILE.npz` (one
//! archive holding arrays `x` and `y`, as `numpy.savez(f, x=…, y=…)` writes it, compressed or
//! not).
//!
//! Features may have any shape `[N, …]` (see [`crate::records::record_shape`]) and dtype
//! `u1` (8-bit pixels, scaled to [0, 1] as MNIST's, with that public range), or any other
//! integer or float dtype (taken as they are; their bounds must be declared for private use).
//! Labels are a `[N]` (or `[N, 1]`) integer or float array mapped to the declared classes as a
//! csv label is (`2`, `2.0` and class "2" are one). Fortran-ordered, structured, string and
//! object arrays are refused, as is any array whose header promises more data than the file
//! holds (so a lying header cannot make us allocate).

use std::io::{BufReader, Read};
use std::path::Path;

use npyz::{DType, NpyFile, Order};

use crate::DataError;
use crate::records::{MAX_SOURCE_VALUES, Records, pixel, record_shape};
use crate::schema::format_number;

/// The array names an `.npz` archive must hold.
pub const NPZ_FEATURES: &str = "x";
/// See [`NPZ_FEATURES`].
pub const NPZ_LABELS: &str = "y";

/// The elements of an array: bytes kept as bytes (pixels), everything else as f64.
enum Values {
    Bytes(Vec<u8>),
    Numbers(Vec<f64>),
}

struct Array {
    shape: Vec<usize>,
    values: Values,
}

/// Reads `npy:FEATURES,LABELS`.
///
/// # Errors
/// [`DataError::Io`] for unreadable files; [`DataError::BadInput`] naming the file for a
/// malformed or unsupported array, non-finite features or counts that disagree.
pub(crate) fn read_npy_pair(features: &Path, labels: &Path) -> Result<Records, DataError> {
    let open = |p: &Path| -> Result<Array, DataError> {
        let file = crate::open_regular(p, "an array")?;
        let size = file.metadata().map_err(|e| DataError::io(p, e))?.len();
        read_array(BufReader::new(file), size, p, "")
    };
    let (x, y) = (open(features)?, open(labels)?);
    let name = format!("npy:{}", features.display());
    records(name, features, x, labels, y)
}

/// Reads `npz:FILE` (arrays `x` and `y`).
///
/// # Errors
/// As [`read_npy_pair`], plus [`DataError::BadInput`] for a file that is not a zip archive or
/// lacks `x.npy` or `y.npy`.
pub(crate) fn read_npz(path: &Path) -> Result<Records, DataError> {
    let file = crate::open_regular(path, "an npz archive")?;
    let mut zip = zip::ZipArchive::new(BufReader::new(file))
        .map_err(|e| DataError::bad_input(path, format!("not an npz (zip) archive: {e}")))?;
    let mut member = |key: &str| -> Result<Array, DataError> {
        let mut entry = zip.by_name(&format!("{key}.npy")).map_err(|_| {
            DataError::bad_input(
                path,
                format!("holds no array {key:?} (save with numpy.savez(f, x=features, y=labels))"),
            )
        })?;
        let size = entry.size();
        let what = format!("array {key:?}: ");
        let array = read_array(&mut entry, size, path, &what)?;
        // The archive checks a member's CRC only when it is read to its end: a damaged member
        // must not be read as data. Nothing may follow the array either.
        let mut rest = [0u8; 1];
        match entry.read(&mut rest) {
            Ok(0) => Ok(array),
            Ok(_) => Err(DataError::bad_input(
                path,
                format!("{what}data follows the array's declared shape"),
            )),
            Err(e) => Err(DataError::bad_input(
                path,
                format!("{what}damaged archive member ({e})"),
            )),
        }
    };
    let x = member(NPZ_FEATURES)?;
    let y = member(NPZ_LABELS)?;
    records(format!("npz:{}", path.display()), path, x, path, y)
}

/// Features and labels as [`Records`].
fn records(
    name: String,
    x_path: &Path,
    x: Array,
    y_path: &Path,
    y: Array,
) -> Result<Records, DataError> {
    let n = x.shape.first().copied().unwrap_or(0);
    let label_shape_ok = matches!(y.shape.as_slice(), [_] | [_, 1]);
    if !label_shape_ok || y.shape[0] != n {
        return Err(DataError::bad_input(
            y_path,
            format!(
                "labels must have shape [{n}] (one per feature record), got {:?}",
                y.shape
            ),
        ));
    }
    let labels = match y.values {
        Values::Bytes(b) => b.iter().map(|&v| v.to_string()).collect(),
        Values::Numbers(v) => v.iter().map(|&v| format_number(v)).collect(),
    };
    let pixels = matches!(x.values, Values::Bytes(_));
    let values = match x.values {
        Values::Bytes(b) => b.into_iter().map(pixel).collect(),
        Values::Numbers(v) => v
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                if v.is_finite() && v.abs() <= f64::from(f32::MAX) {
                    Ok(v as f32)
                } else {
                    Err(DataError::bad_input(
                        x_path,
                        format!(
                            "element {i} is {v}: features must be finite and within the f32 range"
                        ),
                    ))
                }
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(Records {
        name,
        path: x_path.to_path_buf(),
        x: values,
        record_shape: record_shape(&x.shape),
        labels,
        label_origin: None,
        pixels,
    })
}

/// Reads one `.npy` stream of at most `available` bytes; `what` prefixes messages.
fn read_array<R: Read>(
    reader: R,
    available: u64,
    path: &Path,
    what: &str,
) -> Result<Array, DataError> {
    let bad = |reason: String| DataError::bad_input(path, format!("{what}{reason}"));
    let npy = NpyFile::new(reader).map_err(|e| bad(format!("not a valid .npy array: {e}")))?;
    if npy.order() == Order::Fortran {
        return Err(bad(
            "Fortran-ordered arrays are not supported (save with numpy.ascontiguousarray)".into(),
        ));
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    if shape.is_empty() {
        return Err(bad("a 0-dimensional array holds no records".into()));
    }
    let DType::Plain(ts) = npy.dtype() else {
        return Err(bad("structured arrays are not supported".into()));
    };
    let type_str = ts.to_string();
    let code = type_str.get(1..).unwrap_or("");
    let item_size: u64 = code.get(1..).and_then(|s| s.parse().ok()).unwrap_or(0);
    if npy.len() > MAX_SOURCE_VALUES {
        return Err(bad(format!(
            "header declares shape {shape:?}: {} values, over the limit of {MAX_SOURCE_VALUES}",
            npy.len()
        )));
    }
    let needed = npy.len().checked_mul(item_size);
    if needed.is_none_or(|b| b > available) {
        return Err(bad(format!(
            "header declares shape {shape:?} of {type_str}, more data than the {available} \
             bytes present"
        )));
    }
    let io = |e: std::io::Error| bad(format!("cannot read the data: {e}"));
    let numbers = |v: Vec<f64>| Values::Numbers(v);
    let values = match code {
        "u1" => Values::Bytes(npy.into_vec::<u8>().map_err(io)?),
        "i1" => numbers(widen(npy.into_vec::<i8>().map_err(io)?)),
        "u2" => numbers(widen(npy.into_vec::<u16>().map_err(io)?)),
        "i2" => numbers(widen(npy.into_vec::<i16>().map_err(io)?)),
        "u4" => numbers(widen(npy.into_vec::<u32>().map_err(io)?)),
        "i4" => numbers(widen(npy.into_vec::<i32>().map_err(io)?)),
        // 64-bit integers beyond 2^53 lose precision as f64; features become f32 anyway.
        "u8" => numbers(
            npy.into_vec::<u64>()
                .map_err(io)?
                .into_iter()
                .map(|v| v as f64)
                .collect(),
        ),
        "i8" => numbers(
            npy.into_vec::<i64>()
                .map_err(io)?
                .into_iter()
                .map(|v| v as f64)
                .collect(),
        ),
        "f4" => numbers(widen(npy.into_vec::<f32>().map_err(io)?)),
        "f8" => numbers(npy.into_vec::<f64>().map_err(io)?),
        _ => {
            return Err(bad(format!(
                "dtype {type_str} is not supported (use uint8, an integer type, float32 or \
                 float64)"
            )));
        }
    };
    Ok(Array { shape, values })
}

fn widen<T: Into<f64>>(v: Vec<T>) -> Vec<f64> {
    v.into_iter().map(Into::into).collect()
}

/// Writers of small `.npy` and `.npz` files for tests.
#[cfg(test)]
pub(crate) mod testutil {
    use std::io::Write;

    /// An `.npy` file (format 1.0) of `dtype` (e.g. `|u1`, `<f4`), `shape` and raw `data`.
    pub(crate) fn npy_bytes(dtype: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
        let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
        let tuple = if dims.len() == 1 {
            format!("({},)", dims[0])
        } else {
            format!("({})", dims.join(", "))
        };
        let mut header =
            format!("{{'descr': '{dtype}', 'fortran_order': False, 'shape': {tuple}, }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    /// An `.npz` archive (deflated) holding `members` as `NAME.npy`.
    pub(crate) fn npz_bytes(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
        npz_with(members, zip::CompressionMethod::Deflated)
    }

    /// An `.npz` archive holding `members` as `NAME.npy`, compressed with `method`.
    pub(crate) fn npz_with(members: &[(&str, Vec<u8>)], method: zip::CompressionMethod) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default().compression_method(method);
        for (name, bytes) in members {
            zip.start_file(format!("{name}.npy"), opts).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::{npy_bytes, npz_bytes, npz_with};
    use super::*;

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn npy_pair_reads_images_and_labels() {
        let dir = tempfile::tempdir().unwrap();
        let (xp, yp) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
        std::fs::write(
            &xp,
            npy_bytes("|u1", &[2, 2, 3], &[0, 255, 51, 0, 0, 0, 1, 2, 3, 4, 5, 6]),
        )
        .unwrap();
        std::fs::write(
            &yp,
            npy_bytes(
                "<i8",
                &[2],
                &[7, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0],
            ),
        )
        .unwrap();
        let r = read_npy_pair(&xp, &yp).unwrap();
        assert_eq!(r.record_shape, vec![1, 2, 3]);
        assert!(r.pixels);
        assert_eq!(&r.x[..3], &[0.0, 1.0, 0.2]);
        assert_eq!(r.labels, ["7", "3"]);
    }

    #[test]
    fn npz_reads_x_and_y_and_floats_stay_floats() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.npz");
        let x = npy_bytes("<f4", &[3, 2], &f32_bytes(&[0.5, -1.0, 2.0, 3.0, 4.0, 5.0]));
        let y = npy_bytes("<f4", &[3], &f32_bytes(&[1.0, 0.0, 1.0]));
        std::fs::write(&p, npz_bytes(&[("x", x.clone()), ("y", y)])).unwrap();
        let r = read_npz(&p).unwrap();
        assert!(!r.pixels);
        assert_eq!(r.record_shape, vec![2]);
        assert_eq!(r.x[1], -1.0);
        assert_eq!(r.labels, ["1", "0", "1"]);
        std::fs::write(&p, npz_bytes(&[("x", x)])).unwrap();
        let msg = read_npz(&p).unwrap_err().to_string();
        assert!(msg.contains("d.npz") && msg.contains("\"y\""), "{msg}");
    }

    /// `bytes` of a zip archive with every member's uncompressed size (local and central
    /// headers) set to `size`, as a deflate bomb's headers honestly say.
    fn claim_size(mut bytes: Vec<u8>, size: u32) -> Vec<u8> {
        for (signature, at) in [(b"PK\x03\x04", 22), (b"PK\x01\x02", 24)] {
            let starts: Vec<usize> = bytes
                .windows(4)
                .enumerate()
                .filter(|(_, w)| w == signature)
                .map(|(i, _)| i)
                .collect();
            for i in starts {
                bytes[i + at..i + at + 4].copy_from_slice(&size.to_le_bytes());
            }
        }
        bytes
    }

    #[test]
    fn an_npz_member_that_inflates_past_the_limit_is_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bomb.npz");
        // 2^28 one-byte values declared; a few present; the archive claims 1 GiB for each.
        let x = npy_bytes("|u1", &[1 << 28], &[0; 64]);
        let y = npy_bytes("|u1", &[1], &[0]);
        let bytes = npz_with(&[("x", x), ("y", y)], zip::CompressionMethod::Stored);
        std::fs::write(&p, claim_size(bytes, 1 << 30)).unwrap();
        let msg = read_npz(&p).unwrap_err().to_string();
        assert!(
            msg.contains("array \"x\"") && msg.contains("over the limit"),
            "{msg}"
        );
    }

    #[test]
    fn an_npz_member_with_a_wrong_crc_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.npz");
        let marker = f32_bytes(&[0.25, 0.5, 0.75, 1.25]);
        let x = npy_bytes("<f4", &[2, 2], &marker);
        let y = npy_bytes("<f4", &[2], &f32_bytes(&[1.0, 0.0]));
        let mut bytes = npz_with(&[("x", x), ("y", y)], zip::CompressionMethod::Stored);
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(read_npz(&p).unwrap().x, vec![0.25, 0.5, 0.75, 1.25]);
        // One feature value changed in the stored data: still a valid array, wrong CRC.
        let at = bytes
            .windows(marker.len())
            .position(|w| w == marker)
            .unwrap();
        bytes[at + 1] ^= 0x40;
        std::fs::write(&p, &bytes).unwrap();
        let msg = read_npz(&p).unwrap_err().to_string();
        assert!(
            msg.contains("array \"x\"") && msg.contains("damaged"),
            "{msg}"
        );
    }

    #[test]
    fn malformed_arrays_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let (xp, yp) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
        std::fs::write(&yp, npy_bytes("|u1", &[2], &[1, 2])).unwrap();
        let cases: [(Vec<u8>, &str); 5] = [
            (b"not numpy at all".to_vec(), "not a valid .npy"),
            (npy_bytes("|u1", &[2, 1000], &[0; 10]), "more data than"),
            (npy_bytes("<c8", &[2, 1], &[0; 16]), "not supported"),
            (npy_bytes("|u1", &[3, 1], &[0; 3]), "shape [3]"),
            (
                npy_bytes("<f4", &[2, 1], &f32_bytes(&[f32::NAN, 0.0])),
                "element 0",
            ),
        ];
        for (bytes, want) in cases {
            std::fs::write(&xp, bytes).unwrap();
            let msg = read_npy_pair(&xp, &yp).unwrap_err().to_string();
            assert!(msg.contains(want) && msg.contains(".npy"), "{want}: {msg}");
        }
    }
}
