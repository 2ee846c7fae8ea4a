//! What a new user meets first: shell completions, the man page, and references in the README,
//! docs/ and `--help` that resolve inside the repository.

use std::process::Command;

/// The program's standard output for `args`, which must succeed.
fn stdout_of(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_forkcache")).args(args).output().expect("the binary runs");
    assert!(
        output.status.success(),
        "{args:?}: exit {:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// Every subcommand's name, from the top-level help's command list.
fn subcommands() -> Vec<String> {
    let help = stdout_of(&["--help"]);
    let list = help.split("Commands:").nth(1).expect("a command list").split("Options:").next().unwrap();
    list.lines().filter_map(|line| line.split_whitespace().next()).map(str::to_string).collect()
}

#[test]
fn completions_cover_every_subcommand_in_each_shell() {
    let commands = subcommands();
    assert!(commands.iter().any(|c| c == "report") && commands.iter().any(|c| c == "completions"));
    // Each shell's script announces itself in its own way.
    let shells = [
        ("bash", "complete -F _forkcache"),
        ("zsh", "#compdef forkcache"),
        ("fish", "complete -c forkcache"),
    ];
    for (shell, signature) in shells {
        let script = stdout_of(&["completions", shell]);
        assert!(script.contains(signature), "{shell} script lacks {signature:?}");
        for command in commands.iter().filter(|c| *c != "help") {
            assert!(script.contains(command.as_str()), "{shell} completions lack `{command}`");
        }
        // Flags come from the same definition: report's --html is offered.
        assert!(script.contains("html"), "{shell} completions lack report's --html");
    }
}

#[test]
fn the_man_page_has_a_page_per_subcommand() {
    let man = stdout_of(&["man"]);
    assert!(man.starts_with(".ie") || man.contains(".TH forkcache"), "roff with a title line");
    for command in subcommands().iter().filter(|c| *c != "help") {
        assert!(man.contains(&format!(".TH forkcache-{command} ")), "no page for `{command}`");
    }
    assert!(man.contains("html"), "report's --html is documented");
    // Nested subcommands have their own pages too.
    for nested in ["import-claude-code", "import-codex"] {
        assert!(man.contains(&format!(".TH forkcache-{nested} ")), "no page for `{nested}`");
    }
}

#[test]
fn readme_and_help_cite_only_documents_in_the_repository() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let mut texts = vec![("README.md".to_string(), readme), ("--help".to_string(), stdout_of(&["--help"]))];
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    for entry in std::fs::read_dir(&docs).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "md") {
            let name = format!("docs/{}", path.file_name().unwrap().to_string_lossy());
            texts.push((name, std::fs::read_to_string(&path).unwrap()));
        }
    }
    for command in subcommands().iter().filter(|c| *c != "help") {
        texts.push((format!("{command} --help"), stdout_of(&[command, "--help"])));
    }
    for (name, text) in &texts {
        assert!(!text.contains("DESIGN §"), "{name} cites a design section that is not in the repository");
        let cite = "docs/design.md §";
        for cited in text.match_indices(cite).map(|(at, _)| section_number(&text[at + cite.len()..])) {
            assert!(
                design_sections().contains(&cited),
                "{name} cites docs/design.md §{cited}, which has no such heading"
            );
        }
    }
}

/// `3` from `3 (the runtime…`, `2.5` from `2.5)`.
fn section_number(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect::<String>()
        .trim_end_matches('.')
        .to_string()
}

/// The numbers of `docs/design.md`'s numbered headings (`## 3. …`, `### 2.5 …`).
fn design_sections() -> Vec<String> {
    let design = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/design.md")).unwrap();
    design
        .lines()
        .filter(|line| line.starts_with('#'))
        .map(|line| section_number(line.trim_start_matches('#').trim_start()))
        .filter(|number| !number.is_empty())
        .collect()
}

#[test]
fn the_front_page_stays_short() {
    // The front page says what forkcache is and how to start; the rest lives in docs/.
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    assert!(
        readme.len() < 15 * 1024,
        "README.md is {} bytes; move detail to a page under docs/",
        readme.len()
    );
}

#[test]
fn every_image_the_docs_show_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut documents = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "md") {
            documents.push(path);
        }
    }
    let mut seen = 0;
    for document in documents.iter().filter(|d| d.exists()) {
        let text = std::fs::read_to_string(document).unwrap();
        // `![alt](path)`: the path is relative to the document's folder.
        for (at, _) in text.match_indices("](") {
            if text[..at].rsplit_once("![").is_none_or(|(_, alt)| alt.contains(']')) {
                continue;
            }
            let target = &text[at + 2..];
            let target = &target[..target.find(')').expect("a closed link")];
            if target.starts_with("http") {
                continue;
            }
            seen += 1;
            let path = document.parent().unwrap().join(target);
            assert!(path.exists(), "{} shows {target}, which does not exist", document.display());
        }
    }
    // README and docs/ show the report charts and the import chart at least.
    assert!(seen >= 10, "{seen} images found");
}
