//! Image folders: `images:DIR` holds one subfolder per class (the subfolder's name is the
//! class), each holding PNG or JPEG files (recognised by their content, not their names).
//!
//! Every image becomes a record of the declared shape `[C, H, W]` (schema key `shape` or
//! `--shape`; C = 1 for grayscale, 3 for RGB). Without a declaration the first image's size
//! is taken, with 3 channels unless it is grayscale: a shape read from a record, which
//! [`crate::load`] marks as inferred and which every private computation refuses (one image
//! would fix every record and the model). An image of another size is refused, naming it and both sizes,
//! unless resizing is asked for (`--resize` or schema key `resize = true`: bilinear). Pixels
//! are scaled to [0, 1] like MNIST's, a public range. Anything else in the folder (a file
//! beside the class folders, a file that is not a PNG or JPEG) is an error naming it: nothing
//! is skipped silently. Files are read in name order, folder by folder, so a run is
//! reproducible.

use std::path::{Path, PathBuf};

use image::imageops::FilterType;
use image::io::Reader as ImageReader;
use image::{ColorType, DynamicImage};

use crate::DataError;
use crate::records::{MAX_RECORD_VALUES, MAX_SOURCE_VALUES, Records, pixel, values_within};

/// The most pixels an image may declare in its header (2²⁶, a 8192 × 8192 image): checked
/// before it is decoded, so that a small file declaring 20 000 × 20 000 pixels is refused.
pub(crate) const MAX_IMAGE_PIXELS: u64 = 1 << 26;

/// How images become records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ImageOptions {
    /// The declared record shape `[C, H, W]`, if any.
    pub shape: Option<Vec<usize>>,
    /// Resize images of another size instead of refusing them.
    pub resize: bool,
}

/// Reads an image folder.
///
/// # Errors
/// [`DataError::Io`] for unreadable folders; [`DataError::BadInput`] naming the file for a
/// stray file, an image that does not decode, a size that differs from the declared one
/// (without resizing), a declared shape that is not `[1 or 3, H, W]`, or a folder without
/// images.
pub(crate) fn read_image_folder(dir: &Path, opts: &ImageOptions) -> Result<Records, DataError> {
    if let Some(shape) = &opts.shape
        && !matches!(shape.as_slice(), [1 | 3, h, w] if *h > 0 && *w > 0)
    {
        return Err(DataError::Schema(format!(
            "shape {shape:?} for an image folder must be [C, H, W] with C = 1 (grayscale) \
             or 3 (RGB)"
        )));
    }
    if let Some(shape) = &opts.shape
        && values_within(shape, MAX_RECORD_VALUES).is_none()
    {
        return Err(DataError::Schema(format!(
            "shape {shape:?} for an image folder holds more than the limit of \
             {MAX_RECORD_VALUES} values per record"
        )));
    }
    let mut shape = opts.shape.clone();
    let mut x = Vec::new();
    let mut labels = Vec::new();
    for class_dir in sorted_entries(dir)? {
        if !class_dir.is_dir() {
            return Err(DataError::bad_input(
                &class_dir,
                "not a class folder: an image folder holds one subfolder per class and nothing else",
            ));
        }
        let class = class_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for file in sorted_entries(&class_dir)? {
            let img = decode(&file)?;
            let s = match &shape {
                Some(s) => s,
                None => shape.insert(natural_shape(&file, &img)?),
            };
            if (x.len() as u64).saturating_add(values_within(s, u64::MAX).unwrap_or(u64::MAX))
                > MAX_SOURCE_VALUES
            {
                return Err(DataError::TooLarge {
                    path: dir.to_path_buf(),
                    reason: format!(
                        "the images hold more than the limit of {MAX_SOURCE_VALUES} values \
                         (at {})",
                        file.display()
                    ),
                });
            }
            append_pixels(&mut x, &file, img, s, opts.resize)?;
            labels.push(class.clone());
        }
    }
    let Some(record_shape) = shape.filter(|_| !labels.is_empty()) else {
        return Err(DataError::bad_input(dir, "holds no images"));
    };
    Ok(Records {
        name: format!("images:{}", dir.display()),
        path: dir.to_path_buf(),
        x,
        record_shape,
        labels,
        label_origin: Some(|class| format!("subfolder {class:?}")),
        pixels: true,
    })
}

/// The entries of `dir` in name order.
fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, DataError> {
    let mut entries = std::fs::read_dir(dir)
        .map_err(|e| DataError::io(dir, e))?
        .map(|e| e.map(|e| e.path()).map_err(|e| DataError::io(dir, e)))
        .collect::<Result<Vec<_>, _>>()?;
    entries.sort();
    Ok(entries)
}

fn decode(file: &Path) -> Result<DynamicImage, DataError> {
    let not_image = |e: &dyn std::fmt::Display| {
        DataError::bad_input(file, format!("not a PNG or JPEG image ({e})"))
    };
    // `is_file` only stats the path: a FIFO or device is refused before anything opens it.
    if !file.is_file() {
        return Err(DataError::bad_input(
            file,
            "not a regular file (class folders hold PNG and JPEG images only)",
        ));
    }
    let open = || -> Result<ImageReader<_>, DataError> {
        let reader = ImageReader::open(file)
            .map_err(|e| DataError::io(file, e))?
            .with_guessed_format()
            .map_err(|e| DataError::io(file, e))?;
        match reader.format() {
            Some(image::ImageFormat::Png | image::ImageFormat::Jpeg) => Ok(reader),
            _ => Err(not_image(&"unrecognised content")),
        }
    };
    // The header's size first (nothing decoded): the pixels it declares are allocated next.
    let (w, h) = open()?.into_dimensions().map_err(|e| not_image(&e))?;
    if u64::from(w) * u64::from(h) > MAX_IMAGE_PIXELS {
        return Err(DataError::bad_input(
            file,
            format!(
                "image declares {w}x{h} pixels (width x height), over the limit of \
                 {MAX_IMAGE_PIXELS} pixels"
            ),
        ));
    }
    open()?.decode().map_err(|e| not_image(&e))
}

/// The shape of an undeclared folder: the first image's size, one channel if it is grey.
///
/// # Errors
/// [`DataError::BadInput`] naming `file` when that shape holds more than
/// [`MAX_RECORD_VALUES`] values.
fn natural_shape(file: &Path, img: &DynamicImage) -> Result<Vec<usize>, DataError> {
    let grey = matches!(
        img.color(),
        ColorType::L8 | ColorType::La8 | ColorType::L16 | ColorType::La16
    );
    let shape = vec![
        if grey { 1 } else { 3 },
        img.height() as usize,
        img.width() as usize,
    ];
    match values_within(&shape, MAX_RECORD_VALUES) {
        Some(_) => Ok(shape),
        None => Err(DataError::bad_input(
            file,
            format!(
                "a record of shape {shape:?} holds more than the limit of {MAX_RECORD_VALUES} \
                 values; declare a smaller --shape and pass --resize"
            ),
        )),
    }
}

/// Appends `img` as `[C, H, W]` (channel-major) pixels in [0, 1].
fn append_pixels(
    x: &mut Vec<f32>,
    file: &Path,
    img: DynamicImage,
    shape: &[usize],
    resize: bool,
) -> Result<(), DataError> {
    let (c, h, w) = (shape[0], shape[1], shape[2]);
    let img = if (img.height() as usize, img.width() as usize) == (h, w) {
        img
    } else if resize {
        img.resize_exact(w as u32, h as u32, FilterType::Triangle)
    } else {
        return Err(DataError::bad_input(
            file,
            format!(
                "image is {}x{} (width x height) but the records are {w}x{h}; declare \
                 `resize = true` in the schema or pass --resize to resize",
                img.width(),
                img.height()
            ),
        ));
    };
    if c == 1 {
        x.extend(img.to_luma8().into_raw().into_iter().map(pixel));
    } else {
        let rgb = img.to_rgb8().into_raw();
        for channel in 0..3 {
            x.extend(rgb.iter().skip(channel).step_by(3).map(|&p| pixel(p)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(path: &Path, w: u32, h: u32, grey: bool) {
        let img = if grey {
            DynamicImage::ImageLuma8(image::GrayImage::from_fn(w, h, |x, y| {
                image::Luma([(x * 10 + y) as u8])
            }))
        } else {
            DynamicImage::ImageRgb8(image::RgbImage::from_fn(w, h, |x, _| {
                image::Rgb([x as u8, 100, 255])
            }))
        };
        img.save_with_format(path, image::ImageFormat::Png).unwrap();
    }

    fn folder(grey: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for class in ["cat", "dog"] {
            std::fs::create_dir(dir.path().join(class)).unwrap();
            png(&dir.path().join(class).join("a.png"), 3, 2, grey);
        }
        dir
    }

    #[test]
    fn grey_and_rgb_folders_become_channel_major_records() {
        let dir = folder(true);
        let r = read_image_folder(dir.path(), &ImageOptions::default()).unwrap();
        assert_eq!(r.record_shape, vec![1, 2, 3]);
        assert_eq!(r.labels, ["cat", "dog"]);
        assert_eq!(r.x[1], pixel(10));
        let dir = folder(false);
        let r = read_image_folder(dir.path(), &ImageOptions::default()).unwrap();
        assert_eq!(r.record_shape, vec![3, 2, 3]);
        // Channel 0 (red) is x; channel 2 (blue) is 255 everywhere.
        assert_eq!(&r.x[..3], &[0.0, pixel(1), pixel(2)]);
        assert_eq!(r.x[12], 1.0);
    }

    /// JPEG is read like PNG (both extensions), with its lossy pixels close to what was saved.
    #[test]
    fn jpeg_files_read_as_png_files_do() {
        let dir = tempfile::tempdir().unwrap();
        for (class, grey) in [("dark", 40u8), ("light", 200)] {
            std::fs::create_dir(dir.path().join(class)).unwrap();
            let img =
                DynamicImage::ImageLuma8(image::GrayImage::from_pixel(8, 6, image::Luma([grey])));
            for name in ["a.jpg", "b.jpeg"] {
                img.save_with_format(dir.path().join(class).join(name), image::ImageFormat::Jpeg)
                    .unwrap();
            }
        }
        let r = read_image_folder(dir.path(), &ImageOptions::default()).unwrap();
        assert_eq!(r.record_shape, vec![1, 6, 8]);
        assert_eq!(r.labels, ["dark", "dark", "light", "light"]);
        let means: Vec<f32> =
            r.x.chunks(48)
                .map(|c| c.iter().sum::<f32>() / 48.0)
                .collect();
        for (m, want) in means.iter().zip([40, 40, 200, 200]) {
            assert!((m - pixel(want)).abs() < 0.02, "{means:?}");
        }
    }

    #[test]
    fn sizes_are_refused_or_resized_as_declared() {
        let dir = folder(true);
        let declared = ImageOptions {
            shape: Some(vec![1, 4, 4]),
            resize: false,
        };
        let msg = read_image_folder(dir.path(), &declared)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("a.png") && msg.contains("3x2"), "{msg}");
        let resized = ImageOptions {
            resize: true,
            ..declared
        };
        let r = read_image_folder(dir.path(), &resized).unwrap();
        assert_eq!(r.x.len(), 2 * 16);
    }

    #[test]
    fn stray_files_are_named() {
        let dir = folder(true);
        std::fs::write(dir.path().join("dog").join("notes.txt"), "hello").unwrap();
        let msg = read_image_folder(dir.path(), &ImageOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("notes.txt") && msg.contains("not a PNG"),
            "{msg}"
        );
        let dir = folder(true);
        std::fs::write(dir.path().join("README"), "x").unwrap();
        let msg = read_image_folder(dir.path(), &ImageOptions::default())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("README"), "{msg}");
    }

    /// A PNG file that declares `w` x `h` grey pixels and holds no image data.
    fn png_header_only(path: &Path, w: u32, h: u32) {
        let chunk = |kind: &[u8], data: &[u8]| {
            let mut c = (data.len() as u32).to_be_bytes().to_vec();
            c.extend_from_slice(kind);
            c.extend_from_slice(data);
            let mut crc = flate2::Crc::new();
            crc.update(kind);
            crc.update(data);
            c.extend_from_slice(&crc.sum().to_be_bytes());
            c
        };
        let mut ihdr = w.to_be_bytes().to_vec();
        ihdr.extend_from_slice(&h.to_be_bytes());
        ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
        let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        bytes.extend(chunk(b"IHDR", &ihdr));
        bytes.extend(chunk(b"IDAT", &[0x78, 0x9c, 0x03, 0x00]));
        bytes.extend(chunk(b"IEND", &[]));
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn declared_sizes_over_the_limits_are_refused_before_decoding() {
        let dir = folder(true);
        // A declared record of 10^10 pixels, resized to: refused before any image is read.
        let huge = ImageOptions {
            shape: Some(vec![1, 100_000, 100_000]),
            resize: true,
        };
        let msg = read_image_folder(dir.path(), &huge)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("100000") && msg.contains("limit"), "{msg}");
        // A 20 000 x 20 000 header in a file of a few dozen bytes: refused by its header.
        png_header_only(&dir.path().join("dog").join("b.png"), 20_000, 20_000);
        let resized = ImageOptions {
            shape: Some(vec![1, 2, 3]),
            resize: true,
        };
        for opts in [ImageOptions::default(), resized] {
            let msg = read_image_folder(dir.path(), &opts)
                .unwrap_err()
                .to_string();
            assert!(
                msg.contains("b.png") && msg.contains("20000x20000") && msg.contains("limit"),
                "{msg}"
            );
        }
        // Under the pixel limit but over a record's without a declared shape.
        std::fs::remove_file(dir.path().join("dog").join("b.png")).unwrap();
        let dir2 = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir2.path().join("a")).unwrap();
        image::GrayImage::new(2049, 2048)
            .save(dir2.path().join("a").join("x.png"))
            .unwrap();
        let msg = read_image_folder(dir2.path(), &ImageOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("x.png") && msg.contains("[1, 2048, 2049]") && msg.contains("--resize"),
            "{msg}"
        );
    }
}
