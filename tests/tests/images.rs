//! The container images: `scripts/build-images.sh` builds both OCI archives from the
//! binaries of this test run (the debug build `cargo test` made; a release build would add
//! minutes to every test run, and the image is assembled the same way from either), then
//! each archive is unpacked as a runtime would (index.json -> manifest -> config and
//! layers) and its entrypoint runs `--version` from the unpacked root with `chroot`, as the
//! image's user.
//!
//! Skipped, saying so, where buildah is not installed (`bash
//! scripts/install-image-tools.sh`) or the test does not run as root (`chroot` and the
//! layers' file ownership need it).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use fleetpulse_tests::process;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// Why this machine cannot build and run the images, if it cannot.
fn cannot_build() -> Option<String> {
    let found = |cmd: &str, arg: &str| {
        Command::new(cmd)
            .arg(arg)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !found("buildah", "--version") {
        return Some(
            "buildah is not installed (bash scripts/install-image-tools.sh installs it)".into(),
        );
    }
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some("not running as root: chroot and the layers' owners need root".into());
    }
    None
}

fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.output()?;
    anyhow::ensure!(
        out.status.success(),
        "{cmd:?} failed with {}:\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// The image references the script tags, hub first.
fn image_refs() -> anyhow::Result<Vec<String>> {
    let script = repo_root().join("scripts/build-images.sh");
    let out = run(Command::new("bash").arg(script).arg("--print-refs"))?;
    Ok(out.lines().map(str::to_owned).collect())
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(serde_json::from_slice(&text)?)
}

fn blob(layout: &Path, digest: &Value) -> anyhow::Result<PathBuf> {
    let digest = digest.as_str().unwrap_or_default();
    let hex = digest
        .strip_prefix("sha256:")
        .ok_or_else(|| anyhow::anyhow!("digest {digest:?} is not sha256"))?;
    Ok(layout.join("blobs/sha256").join(hex))
}

/// An unpacked image: its reference, config and root filesystem.
struct Unpacked {
    reference: String,
    config: Value,
    root: PathBuf,
}

/// Unpacks an OCI archive into `dir`: index.json names one manifest, the manifest names
/// the config and the layers, and the layers are applied in order onto `dir/root`.
fn unpack(archive: &Path, dir: &Path) -> anyhow::Result<Unpacked> {
    let layout = dir.join("layout");
    let root = dir.join("root");
    std::fs::create_dir_all(&layout)?;
    std::fs::create_dir_all(&root)?;
    run(Command::new("tar")
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(&layout))?;
    let index = read_json(&layout.join("index.json"))?;
    let manifests = index["manifests"].as_array().cloned().unwrap_or_default();
    anyhow::ensure!(manifests.len() == 1, "index.json: {index}");
    let reference = manifests[0]["annotations"]["org.opencontainers.image.ref.name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let manifest = read_json(&blob(&layout, &manifests[0]["digest"])?)?;
    let config = read_json(&blob(&layout, &manifest["config"]["digest"])?)?;
    let layers = manifest["layers"].as_array().cloned().unwrap_or_default();
    anyhow::ensure!(!layers.is_empty(), "manifest without layers: {manifest}");
    for layer in &layers {
        // GNU tar recognises gzip and zstd layers by their content.
        run(Command::new("tar")
            .arg("-xpf")
            .arg(blob(&layout, &layer["digest"])?)
            .arg("-C")
            .arg(&root))?;
    }
    Ok(Unpacked {
        reference,
        config,
        root,
    })
}

/// Regular executable files that are not shared libraries, relative to `root`.
fn programs(root: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            if meta.is_dir() {
                dirs.push(entry.path());
            } else if meta.is_file()
                && meta.permissions().mode() & 0o111 != 0
                && !name.contains(".so")
            {
                let path = entry.path();
                found.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    found
}

#[test]
fn both_images_build_as_oci_archives_and_their_entrypoints_run_from_the_unpacked_root()
-> anyhow::Result<()> {
    if let Some(why) = cannot_build() {
        eprintln!("SKIPPED images test: {why}");
        return Ok(());
    }
    let bin_dir = process::binary("fleetpulse-hub")?
        .parent()
        .expect("a binary sits in a directory")
        .to_path_buf();
    process::binary("fleetpulse-agent")?;
    let out = tempfile::tempdir()?;
    run(Command::new("bash")
        .arg(repo_root().join("scripts/build-images.sh"))
        .arg("--bin-dir")
        .arg(&bin_dir)
        .arg("--out")
        .arg(out.path()))?;
    let version = env!("CARGO_PKG_VERSION");

    for (name, reference) in ["fleetpulse-hub", "fleetpulse-agent"]
        .into_iter()
        .zip(image_refs()?)
    {
        let dir = tempfile::tempdir()?;
        let image = unpack(&out.path().join(format!("{name}.oci.tar")), dir.path())?;
        assert_eq!(
            image.reference, reference,
            "{name}: the archive's reference"
        );
        let config = &image.config["config"];
        let entrypoint = format!("/usr/local/bin/{name}");
        assert_eq!(
            config["Entrypoint"],
            serde_json::json!([entrypoint]),
            "{name}"
        );
        assert_eq!(config["User"], "65532:65532", "{name}: runs as non-root");

        // No shell, no other program: the only executable that is not a library is ours.
        assert_eq!(
            programs(&image.root),
            vec![entrypoint[1..].to_owned()],
            "{name}"
        );
        let bundle = std::fs::read_to_string(image.root.join("etc/ssl/certs/ca-certificates.crt"))?;
        let certificates = bundle.matches("BEGIN CERTIFICATE").count();
        assert!(certificates > 100, "{name}: {certificates} CA certificates");
        let passwd = std::fs::read_to_string(image.root.join("etc/passwd"))?;
        assert!(passwd.contains(":65532:65532:"), "{name}: {passwd}");

        let printed = run(Command::new("chroot")
            .arg("--userspec=65532:65532")
            .arg(&image.root)
            .arg(&entrypoint)
            .arg("--version"))?;
        assert_eq!(
            printed.trim(),
            format!("{name} {version}"),
            "{name} --version"
        );
    }
    Ok(())
}
