//! More than one config file (issue 8, section 5), on the real kernel:
//! several files and a directory merged into one desired state, duplicates
//! across files refused naming both places, and an apply without a file
//! given before says it removes that file's interfaces.

mod common;

use std::fs;

use common::*;

const EXIT_NOT_READY: i32 = 5;

/// Writes the standard blocks of `rails` into `dir/name`.
fn file_of(tb: &Testbed, dir: &std::path::Path, name: &str, rails: &[&str], extra: &str) -> String {
    let text = tb.render_config_for(|r| rails.contains(&r.name.as_str()), |_| vec![]);
    let path = dir.join(name);
    fs::write(&path, format!("{extra}{text}")).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn two_files_apply_together_and_one_alone_names_the_other() {
    let tb = Testbed::builder().rails(4).build();
    let compute = file_of(&tb, tb.dir(), "compute.toml", &["rail0", "rail1"], "");
    let storage = file_of(&tb, tb.dir(), "storage.toml", &["rail2", "rail3"], "");
    tb.rr(&["apply", &compute, &storage]).expect_code(EXIT_OK);
    for k in 0..4 {
        let r = tb.rail(k);
        assert!(tb.route_get(PEER_V4, &r.v4).contains(&format!("table {}", r.table)), "rail{k}");
    }
    tb.rr(&["check", &compute, &storage]).expect_code(EXIT_OK);
    // The storage rails would go silently with compute.toml alone.
    let dry = tb.rr(&["--json", "apply", "--dry-run", &compute]).expect_code(EXIT_OK);
    let doc = json_doc(&dry);
    let dropped: Vec<(String, String)> = doc["dropped_with_file"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["interface"].as_str().unwrap().to_string(), d["file"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        dropped,
        [("rail2".to_string(), storage.clone()), ("rail3".to_string(), storage.clone())],
        "{doc:#}"
    );
    let run = tb.rr(&["apply", &compute]).expect_code(EXIT_OK);
    run.expect_stderr(&[&format!("interface rail2 was applied from {storage}, which is not given now")]);
}

/// Issue 27: a config of absent interfaces (ib0..ib3) on the applied
/// rails' tables and addresses. Old: "this apply removes its routes, rules
/// and sysctls" of rail0..rail3, though the not-ready ib rails kept their
/// tables (only the sysctls went back); and the next apply of the real
/// config warned it removed ib0's entries, which never existed.
#[test]
fn a_dropped_file_warning_says_what_the_plan_removes() {
    let tb = Testbed::builder().rails(4).build();
    let rails = file_of(&tb, tb.dir(), "rails.toml", &["rail0", "rail1", "rail2", "rail3"], "");
    tb.rr(&["apply", &rails]).expect_code(EXIT_OK);
    let ib = tb.dir().join("ib.toml");
    fs::write(&ib, fs::read_to_string(&rails).unwrap().replace("name = \"rail", "name = \"ib")).unwrap();
    let run = tb.rr(&["apply", path_str(&ib)]).expect_code(EXIT_NOT_READY);
    let stderr = run.stderr();
    assert!(!stderr.contains("removes its routes"), "{stderr}");
    for k in 0..4 {
        let r = tb.rail(k);
        let line = format!(
            "interface rail{k} was applied from {rails}, which is not given now: this apply sets its 2 sysctls \
             back to the values recorded before roce-route, and deletes no route or rule of it"
        );
        assert!(stderr.contains(&line), "{stderr}");
        assert!(tb.route_get(PEER_V4, &r.v4).contains(&format!("table {}", r.table)), "rail{k}: {stderr}");
    }
    let again = tb.rr(&["apply", &rails]).expect_code(EXIT_OK);
    assert!(!again.stderr().contains("ib0"), "{}", again.stderr());
}

#[test]
fn a_directory_stands_for_its_toml_files_in_name_order() {
    let tb = Testbed::builder().rails(3).build();
    let dir = tb.dir().join("conf.d");
    fs::create_dir(&dir).unwrap();
    file_of(&tb, &dir, "10-compute.toml", &["rail0", "rail1"], "[defaults]\nrp_filter = 2\n");
    file_of(&tb, &dir, "20-storage.toml", &["rail2"], "");
    fs::write(dir.join("README"), "not a config").unwrap();
    let d = path_str(&dir);
    tb.rr(&["apply", d]).expect_code(EXIT_OK);
    // [defaults] of one file applies to the other file's rails too.
    assert_eq!(tb.host_sysctl("rail2", "rp_filter"), 2);
    tb.rr(&["check", d]).expect_code(EXIT_OK);
    let empty = tb.dir().join("empty.d");
    fs::create_dir(&empty).unwrap();
    tb.rr(&["apply", path_str(&empty)]).expect_code(EXIT_INVALID).expect_stderr(&["no *.toml file"]);
}

#[test]
fn an_interface_in_two_files_is_refused_naming_both() {
    let tb = Testbed::builder().rails(2).build();
    let before = tb.dump();
    let a = file_of(&tb, tb.dir(), "a.toml", &["rail0", "rail1"], "");
    let b = file_of(&tb, tb.dir(), "b.toml", &["rail1"], "\n");
    let run = tb.rr(&["apply", &a, &b]).expect_code(EXIT_INVALID);
    run.expect_stderr(&[&format!("{b}:3:8"), &format!("interface \"rail1\" is also configured in {a}:")]);
    assert_dump_eq(&before, &tb.dump(), "a refused config changed the host");
}
