//! `ski::storage::inside_root` on real files, real symbolic links (dangling ones included) and
//! real FIFOs in a temp dir: what resolves, what is refused and with which message.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use nix::sys::stat::Mode;
use ski::storage::inside_root::{
    EntryKind, InsideRootError, Root, open_regular_for_read, read_regular,
};

/// A root and an outside directory next to it, both canonical.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().canonicalize().expect("canonical");
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("sub")).expect("root");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(root.join("sub/file.txt"), "inside\n").expect("file");
    std::fs::write(outside.join("secret"), "secret\n").expect("secret");
    World {
        _dir: dir,
        root,
        outside,
    }
}

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, Mode::from_bits_truncate(0o600)).expect("mkfifo");
}

fn resolve(world: &World, path: &str) -> Result<PathBuf, InsideRootError> {
    Root::new(&world.root)?
        .resolve(Path::new(path))
        .map(|r| r.path())
}

#[test]
fn plain_paths_resolve_below_the_root() {
    let world = world();
    let root = Root::new(&world.root).expect("root");
    let file = root.resolve(Path::new("sub/file.txt")).expect("file");
    assert_eq!(file.kind(), Some(EntryKind::RegularFile));
    assert_eq!(
        file.existing_file().expect("readable"),
        world.root.join("sub/file.txt")
    );
    assert_eq!(
        resolve(&world, "./sub/../sub/file.txt").expect("dots inside"),
        world.root.join("sub/file.txt")
    );
    let new = root.resolve(Path::new("sub/new.txt")).expect("new");
    assert_eq!(new.kind(), None);
    assert_eq!(
        new.file_to_write().expect("writable"),
        world.root.join("sub/new.txt")
    );
    assert!(matches!(
        new.existing_file(),
        Err(InsideRootError::NotFound { .. })
    ));
    let deep = root.resolve(Path::new("a/b/c.txt")).expect("deep");
    let error = deep.file_to_write().expect_err("a missing directory");
    assert_eq!(
        error.to_string(),
        "a/b/c.txt: the directory a does not exist"
    );
    let error = root
        .resolve(Path::new("sub/file.txt/x"))
        .expect_err("through a file");
    assert_eq!(
        error.to_string(),
        "sub/file.txt/x: sub/file.txt is not a directory"
    );
}

#[test]
fn dot_dot_past_the_root_and_absolute_paths_are_refused() {
    let world = world();
    let error = resolve(&world, "../outside/secret").expect_err("climbs out");
    assert_eq!(
        error.to_string(),
        "../outside/secret climbs out of the root with '..'"
    );
    assert!(error.is_escape());
    let error = resolve(&world, "sub/../../root/sub/file.txt").expect_err("out and back");
    assert!(
        matches!(error, InsideRootError::ClimbsOut { .. }),
        "{error}"
    );
    let absolute = world.root.join("sub/file.txt");
    let error = resolve(&world, absolute.to_str().unwrap()).expect_err("absolute");
    assert!(matches!(error, InsideRootError::Absolute { .. }), "{error}");

    let root = Root::new(&world.root).expect("root");
    assert_eq!(
        root.resolve_absolute(&absolute).expect("inside").path(),
        absolute
    );
    let error = root
        .resolve_absolute(&world.outside.join("secret"))
        .expect_err("outside");
    assert!(matches!(error, InsideRootError::Outside { .. }), "{error}");
}

#[test]
fn a_root_given_through_a_link_accepts_both_spellings() {
    let world = world();
    let alias = world.outside.join("alias");
    symlink(&world.root, &alias).expect("alias");
    let root = Root::new(&alias).expect("root");
    assert_eq!(root.path(), world.root);
    for spelling in [alias.join("sub/file.txt"), world.root.join("sub/file.txt")] {
        assert_eq!(
            root.resolve_absolute(&spelling).expect("inside").path(),
            world.root.join("sub/file.txt")
        );
    }
}

#[test]
fn links_that_stay_inside_are_followed() {
    let world = world();
    symlink("sub", world.root.join("relative")).expect("relative link");
    symlink(world.root.join("sub"), world.root.join("absolute")).expect("absolute link");
    symlink("../sub/file.txt", world.root.join("sub/up-and-back")).expect("up and back");
    for path in ["relative/file.txt", "absolute/file.txt", "sub/up-and-back"] {
        assert_eq!(
            resolve(&world, path).expect(path),
            world.root.join("sub/file.txt"),
            "{path}"
        );
    }
    // A dangling link whose target would be inside: a write creates the target, inside.
    symlink("sub/later.txt", world.root.join("later")).expect("dangling inside");
    let root = Root::new(&world.root).expect("root");
    assert_eq!(
        root.resolve(Path::new("later"))
            .expect("later")
            .file_to_write()
            .expect("writable"),
        world.root.join("sub/later.txt")
    );
}

#[test]
fn links_that_leave_the_root_are_refused_dangling_or_not() {
    let world = world();
    let outside = world.outside.display().to_string();
    symlink(&world.outside, world.root.join("docs")).expect("dir link");
    symlink(world.outside.join("secret"), world.root.join("notes.md")).expect("file link");
    symlink(world.outside.join("created.txt"), world.root.join("escape")).expect("dangling");
    symlink("../../outside/x", world.root.join("sub/climb")).expect("relative out");
    let cases = [
        (
            "docs/readme.md",
            format!("docs/readme.md leaves the root through the link docs -> {outside}"),
        ),
        (
            "notes.md",
            format!("notes.md leaves the root through the link notes.md -> {outside}/secret"),
        ),
        (
            "escape",
            format!("escape leaves the root through the link escape -> {outside}/created.txt"),
        ),
        (
            "sub/climb",
            "sub/climb leaves the root through the link sub/climb -> ../../outside/x".to_owned(),
        ),
    ];
    for (path, message) in cases {
        let error = resolve(&world, path).expect_err(path);
        assert!(error.is_escape(), "{error}");
        assert_eq!(error.to_string(), message);
    }
    assert!(!world.outside.join("created.txt").exists());
}

#[test]
fn a_link_loop_is_refused() {
    let world = world();
    symlink("b", world.root.join("a")).expect("a");
    symlink("a", world.root.join("b")).expect("b");
    let error = resolve(&world, "a").expect_err("loop");
    assert!(
        matches!(error, InsideRootError::TooManyLinks { .. }),
        "{error}"
    );
}

#[test]
fn fifos_and_directories_are_not_regular_files_and_never_block() {
    let world = world();
    let fifo = world.root.join("pipe");
    mkfifo(&fifo);
    let root = Root::new(&world.root).expect("root");
    let resolved = root.resolve(Path::new("pipe")).expect("pipe");
    assert_eq!(resolved.kind(), Some(EntryKind::Other("a FIFO")));
    assert_eq!(
        resolved.existing_file().expect_err("read").to_string(),
        "pipe is a FIFO, not a regular file"
    );
    assert!(resolved.file_to_write().is_err());
    // Opened directly (as if the FIFO replaced a file after the check): refused, not blocked.
    let error = open_regular_for_read(&fifo).expect_err("read a FIFO");
    assert!(
        matches!(error, InsideRootError::NotRegular { .. }),
        "{error}"
    );
    // Resolved while nothing was there, then a FIFO took the name: the write is refused.
    let late = root.resolve(Path::new("late-pipe")).expect("late pipe");
    mkfifo(&world.root.join("late-pipe"));
    let error = late.write_file(b"x").expect_err("write a FIFO");
    assert!(
        matches!(error, InsideRootError::NotRegular { .. }),
        "{error}"
    );
    let directory = root.resolve(Path::new("sub")).expect("sub");
    assert_eq!(
        directory
            .file_to_write()
            .expect_err("a directory")
            .to_string(),
        "sub is a directory, not a regular file"
    );
    let late = root.resolve(Path::new("late-dir")).expect("late dir");
    std::fs::create_dir(world.root.join("late-dir")).expect("mkdir");
    let error = late.write_file(b"x").expect_err("write a dir");
    assert!(
        matches!(error, InsideRootError::NotRegular { .. }),
        "{error}"
    );
}

#[test]
fn writes_do_not_follow_a_final_link_and_reads_are_bounded() {
    let world = world();
    let root = Root::new(&world.root).expect("root");
    // Resolved while nothing was there, then a link to a file outside took the name.
    let late = root.resolve(Path::new("late-link")).expect("late link");
    let link = world.root.join("late-link");
    symlink(world.outside.join("secret"), &link).expect("link");
    let error = late.write_file(b"overwritten").expect_err("final link");
    assert!(
        matches!(error, InsideRootError::NotRegular { .. }),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(world.outside.join("secret")).expect("secret"),
        "secret\n"
    );
    assert!(open_regular_for_read(&link).is_err());

    let file = root.resolve(Path::new("sub/file.txt")).expect("file");
    file.write_file(b"short").expect("write");
    assert_eq!(file.read_file(5).expect("read"), b"short");
    let path = world.root.join("sub/file.txt");
    assert_eq!(read_regular(&path, 5).expect("read"), b"short");
    let error = read_regular(&path, 4).expect_err("too large");
    assert_eq!(
        error.to_string(),
        format!("{} is larger than 4 bytes", path.display())
    );
    assert_eq!(
        file.read_file(4).expect_err("too large").to_string(),
        "sub/file.txt is larger than 4 bytes"
    );
}

/// A directory on the resolved path swapped for a link out of the root after the resolution
/// (what a process racing the writer does): the open itself refuses it, so nothing outside is
/// read, created or changed.
#[test]
fn a_directory_swapped_for_a_link_after_resolution_is_refused() {
    let world = world();
    let root = Root::new(&world.root).expect("root");
    let existing = root.resolve(Path::new("sub/file.txt")).expect("existing");
    let new = root.resolve(Path::new("sub/new.txt")).expect("new");
    std::fs::rename(world.root.join("sub"), world.root.join("sub.moved")).expect("move");
    std::fs::write(world.outside.join("file.txt"), "outside\n").expect("outside file");
    symlink(&world.outside, world.root.join("sub")).expect("swap in a link");

    let error = new
        .write_file(b"escaped")
        .expect_err("a new file through the link");
    assert!(!world.outside.join("new.txt").exists(), "{error}");
    let error = existing
        .write_file(b"changed")
        .expect_err("an existing file through it");
    assert_eq!(
        std::fs::read_to_string(world.outside.join("file.txt")).expect("outside"),
        "outside\n",
        "{error}"
    );
    let error = existing
        .read_file(1024)
        .expect_err("a read through the link");
    assert!(error.to_string().contains("sub/file.txt"), "{error}");
}

#[test]
fn missing_parents_are_created_one_at_a_time_inside() {
    let world = world();
    let root = Root::new(&world.root).expect("root");
    let deep = root.resolve(Path::new("a/b/c.txt")).expect("deep");
    deep.create_missing_parents().expect("mkdir");
    assert!(world.root.join("a/b").is_dir());
    let again = root.resolve(Path::new("a/b/c.txt")).expect("again");
    again.write_file(b"c").expect("write");
    assert_eq!(
        std::fs::read_to_string(world.root.join("a/b/c.txt")).expect("c"),
        "c"
    );
}
