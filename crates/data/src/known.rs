//! Compiled-in knowledge of the public data files: sizes and SHA-256 sums, and hashing helpers.
//!
//! The `.gz` sums are those of `shared/data/SHA256SUMS` (each file's MD5 matches the canonical
//! published value; see that folder's README). The sums of the unpacked IDX files were computed
//! from the same verified files (`gunzip -c FILE | sha256sum`), so an unpacked copy can be
//! verified too.

use std::io::{self, Read};

use sha2::{Digest, Sha256};

use crate::embedded::Embedded;

/// One known IDX file, in its gzip and unpacked forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KnownIdxFile {
    /// Sub-directory of the data directory (`mnist`, `fashion-mnist`).
    pub dir: &'static str,
    /// File name without `.gz`, e.g. `train-images-idx3-ubyte`.
    pub stem: &'static str,
    /// Size of the `.gz` file in bytes.
    pub gz_size: u64,
    /// SHA-256 of the `.gz` file, hex.
    pub gz_sha256: &'static str,
    /// SHA-256 of the unpacked file, hex.
    pub raw_sha256: &'static str,
}

impl KnownIdxFile {
    /// The `.gz` file name.
    pub fn gz_name(&self) -> String {
        format!("{}.gz", self.stem)
    }
}

const fn file(
    dir: &'static str,
    stem: &'static str,
    gz_size: u64,
    gz_sha256: &'static str,
    raw_sha256: &'static str,
) -> KnownIdxFile {
    KnownIdxFile {
        dir,
        stem,
        gz_size,
        gz_sha256,
        raw_sha256,
    }
}

/// The four files of MNIST and of Fashion-MNIST.
pub(crate) const IDX_FILES: [KnownIdxFile; 8] = [
    file(
        "mnist",
        "train-images-idx3-ubyte",
        9_912_422,
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    ),
    file(
        "mnist",
        "train-labels-idx1-ubyte",
        28_881,
        "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    ),
    file(
        "mnist",
        "t10k-images-idx3-ubyte",
        1_648_877,
        "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    ),
    file(
        "mnist",
        "t10k-labels-idx1-ubyte",
        4_542,
        "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    ),
    file(
        "fashion-mnist",
        "train-images-idx3-ubyte",
        26_421_880,
        "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    ),
    file(
        "fashion-mnist",
        "train-labels-idx1-ubyte",
        29_515,
        "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    ),
    file(
        "fashion-mnist",
        "t10k-images-idx3-ubyte",
        4_422_102,
        "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    ),
    file(
        "fashion-mnist",
        "t10k-labels-idx1-ubyte",
        5_148,
        "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    ),
];

/// The known files of one IDX data set directory, in the order train images, train labels,
/// test images, test labels.
pub(crate) fn idx_files(dir: &str) -> impl Iterator<Item = &'static KnownIdxFile> + '_ {
    IDX_FILES.iter().filter(move |f| f.dir == dir)
}

/// The SHA-256 of an embedded table's file, as published in scikit-learn's wheel `RECORD`.
pub(crate) fn embedded_sha256(e: Embedded) -> &'static str {
    match e {
        Embedded::Iris => "f13ffa8fdd56fd8e6c8d16d4081a3fbd3114bcd0aae4256c43205169cd9d1449",
        Embedded::BreastCancer => {
            "fed3eb72d0575ef6192293f5093c6e801b1476b577d0386bf4455504522172ed"
        }
        Embedded::Wine => "10e8a802908b34f86e5da8ce962f3c806694bc98450a18f61851af59f324bede",
        Embedded::Digits => "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22",
    }
}

/// Lower-case hex of a digest.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of everything `reader` yields, hex.
pub(crate) fn sha256_reader(mut reader: impl Read) -> io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => hasher.update(&buf[..k]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(hex(&hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_vector() {
        // FIPS 180-2 test vector.
        let h = sha256_reader(&b"abc"[..]).unwrap();
        assert_eq!(
            h,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn embedded_bytes_match_their_published_sums() {
        for e in Embedded::ALL {
            assert_eq!(
                sha256_reader(e.bytes()).unwrap(),
                embedded_sha256(e),
                "{e:?}"
            );
        }
    }

    #[test]
    fn each_idx_set_has_four_files() {
        assert_eq!(idx_files("mnist").count(), 4);
        assert_eq!(idx_files("fashion-mnist").count(), 4);
        assert!(
            IDX_FILES
                .iter()
                .all(|f| f.gz_sha256.len() == 64 && f.raw_sha256.len() == 64)
        );
    }
}
