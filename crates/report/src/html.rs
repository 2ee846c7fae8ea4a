//! One self-contained HTML page: headings, paragraphs, charts as inline SVG and tables the
//! reader can sort by clicking a column's header. Nothing is fetched: the style and the few
//! lines of script are in the page, so it opens the same offline, from a file or an archive.
//!
//! [`Page`] is a small builder any command can fill (the report's `index.html` is one user);
//! [`Page::render`] gives the document, byte-identical for the same content.

use std::fmt::Write as _;

/// A table: a header row and rows of cells, each cell shown as written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows, each as wide as `columns`.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// The table as people read it: each `*_nanousd` column becomes `*_usd` in dollars, and
    /// each column named in `fractions` (shares between 0 and 1) a percentage. Cells that are
    /// not numbers stay as written.
    pub fn for_reading(mut self, fractions: &[&str]) -> Table {
        for (index, column) in self.columns.iter_mut().enumerate() {
            let convert: fn(f64) -> String = if let Some(stem) = column.strip_suffix("_nanousd") {
                *column = format!("{stem}_usd");
                |nanousd| dollars(nanousd.round() as i64)
            } else if fractions.contains(&column.as_str()) {
                |share| percent((share * 1000.0).round() as i64)
            } else {
                continue;
            };
            for row in &mut self.rows {
                if let Some(cell) = row.get_mut(index) {
                    if let Ok(value) = cell.parse::<f64>() {
                        *cell = convert(value);
                    }
                }
            }
        }
        self
    }

    /// A table from CSV text (the first record is the header).
    pub fn from_csv(text: &str) -> Result<Table, csv::Error> {
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let columns = reader.headers()?.iter().map(str::to_string).collect();
        let rows = reader
            .records()
            .map(|record| record.map(|r| r.iter().map(str::to_string).collect()))
            .collect::<Result<_, _>>()?;
        Ok(Table { columns, rows })
    }
}

/// One piece of a section.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Block {
    Paragraph(String),
    Chart { svg: String, caption: String },
    Table { caption: String, table: Table },
}

/// A headed part of the page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    heading: String,
    blocks: Vec<Block>,
}

impl Section {
    /// Adds a paragraph of plain text.
    pub fn paragraph(&mut self, text: impl Into<String>) -> &mut Section {
        self.blocks.push(Block::Paragraph(text.into()));
        self
    }

    /// Adds a chart (an SVG document, inlined as is) with a one-line caption under it.
    pub fn chart(&mut self, svg: impl Into<String>, caption: impl Into<String>) -> &mut Section {
        self.blocks.push(Block::Chart { svg: svg.into(), caption: caption.into() });
        self
    }

    /// Adds a sortable table with a caption above it.
    pub fn table(&mut self, caption: impl Into<String>, table: Table) -> &mut Section {
        self.blocks.push(Block::Table { caption: caption.into(), table });
        self
    }
}

/// A page under construction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    title: String,
    intro: String,
    headline: Option<String>,
    sections: Vec<Section>,
}

/// The page's look: readable width, charts scaled to it, tables that scroll when wide.
const STYLE: &str = "body{font-family:sans-serif;max-width:1240px;margin:2em auto;padding:0 1em;color:#222}\
figure{margin:1.5em 0}figure svg{max-width:100%;height:auto;border:1px solid #ddd}\
figcaption{color:#444;margin-top:.4em}.scroll{overflow-x:auto}\
table{border-collapse:collapse;font-size:13px;margin:.5em 0 1.5em}\
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;white-space:nowrap}td.num{text-align:right}\
.headline{font-size:1.25em;font-weight:bold}nav li{margin:.2em 0}\
th{background:#f2f2f2;cursor:pointer;user-select:none}th:hover{background:#e4e4e4}\
th[aria-sort=ascending]::after{content:' \\25B2'}th[aria-sort=descending]::after{content:' \\25BC'}";

/// Click a header to sort its table by that column (numbers as numbers), again to reverse.
const SCRIPT: &str = "document.querySelectorAll('table.sortable th').forEach(function(th){\
th.addEventListener('click',function(){\
var table=th.closest('table'),body=table.tBodies[0],col=th.cellIndex;\
var down=th.getAttribute('aria-sort')==='ascending';\
table.querySelectorAll('th').forEach(function(h){h.removeAttribute('aria-sort');});\
th.setAttribute('aria-sort',down?'descending':'ascending');\
var key=function(row){var t=row.cells[col].textContent,n=Number(t.replace(/^[$]|%$/g,''));return t!==''&&!isNaN(n)?n:t;};\
var rows=Array.prototype.slice.call(body.rows);\
rows.sort(function(a,b){var x=key(a),y=key(b);\
var c=typeof x===typeof y?(x<y?-1:x>y?1:0):(typeof x==='number'?-1:1);return down?-c:c;});\
rows.forEach(function(row){body.appendChild(row);});});});";

impl Page {
    /// An empty page with a title and an introductory line.
    pub fn new(title: impl Into<String>, intro: impl Into<String>) -> Page {
        Page { title: title.into(), intro: intro.into(), headline: None, sections: Vec::new() }
    }

    /// The one figure the page opens with, above its contents.
    pub fn headline(&mut self, text: impl Into<String>) -> &mut Page {
        self.headline = Some(text.into());
        self
    }

    /// Starts a section; fill it through the returned reference.
    pub fn section(&mut self, heading: impl Into<String>) -> &mut Section {
        let index = self.sections.len();
        self.sections.push(Section { heading: heading.into(), blocks: Vec::new() });
        &mut self.sections[index]
    }

    /// The HTML document.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let title = escape(&self.title);
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n<p>{}</p>\n",
            escape(&self.intro)
        );
        if let Some(headline) = &self.headline {
            let _ = writeln!(out, "<p class=\"headline\">{}</p>", escape(headline));
        }
        out.push_str("<nav>\n<ul>\n");
        for (index, section) in self.sections.iter().enumerate() {
            let _ =
                writeln!(out, "<li><a href=\"#section-{}\">{}</a></li>", index + 1, escape(&section.heading));
        }
        out.push_str("</ul>\n</nav>\n");
        for (index, section) in self.sections.iter().enumerate() {
            let _ = writeln!(
                out,
                "<section id=\"section-{}\">\n<h2>{}</h2>",
                index + 1,
                escape(&section.heading)
            );
            for block in &section.blocks {
                render_block(&mut out, block);
            }
            out.push_str("</section>\n");
        }
        let _ = write!(out, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
        out
    }
}

fn render_block(out: &mut String, block: &Block) {
    match block {
        Block::Paragraph(text) => {
            let _ = writeln!(out, "<p>{}</p>", escape(text));
        }
        Block::Chart { svg, caption } => {
            let _ = writeln!(
                out,
                "<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>",
                svg.trim(),
                escape(caption)
            );
        }
        Block::Table { caption, table } => render_table(out, caption, table),
    }
}

fn render_table(out: &mut String, caption: &str, table: &Table) {
    if table.rows.is_empty() {
        let _ = writeln!(out, "<p>{}: none</p>", escape(caption));
        return;
    }
    let _ = writeln!(
        out,
        "<div class=\"scroll\">\n<table class=\"sortable\">\n<caption>{}</caption>",
        escape(caption)
    );
    out.push_str("<thead><tr>");
    for column in &table.columns {
        let _ = write!(out, "<th scope=\"col\">{}</th>", escape(column));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &table.rows {
        out.push_str("<tr>");
        for cell in row {
            let class = if is_number(cell) { " class=\"num\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n</div>\n");
}

/// Nano-dollars as dollars to the micro-dollar (`$0.093420`), rounded half up, in integers.
fn dollars(nanousd: i64) -> String {
    let micro = (nanousd.abs() + 500) / 1000;
    let sign = if nanousd < 0 { "-" } else { "" };
    format!("{sign}${}.{:06}", micro / 1_000_000, micro % 1_000_000)
}

/// Thousandths as a percentage with one decimal (`897` → `89.7%`).
fn percent(permille: i64) -> String {
    let sign = if permille < 0 { "-" } else { "" };
    format!("{sign}{}.{}%", permille.abs() / 10, permille.abs() % 10)
}

/// Whether a cell reads as a number (a count, `$1.50`, `12.5%`), right-aligned so that digits line
/// up.
fn is_number(cell: &str) -> bool {
    let bare = cell.strip_prefix('$').unwrap_or(cell);
    let bare = bare.strip_suffix('%').unwrap_or(bare);
    !bare.is_empty() && bare.parse::<f64>().is_ok_and(f64::is_finite)
}

/// Text made safe to place between tags or in a quoted attribute.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_holds_its_parts_in_order_and_escapes_text() {
        let mut page = Page::new("Costs <draft>", "intro & more");
        page.section("Charts").chart("<svg width=\"10\"></svg>", "read \"this\"");
        let table = Table::from_csv("a,b\n1,x<y\n").unwrap();
        page.section("Tables").paragraph("p").table("t", table);
        let html = page.render();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<title>Costs &lt;draft&gt;</title>"));
        assert!(html.contains("<p>intro &amp; more</p>"));
        assert!(html.contains("<svg width=\"10\"></svg>\n<figcaption>read &quot;this&quot;</figcaption>"));
        assert!(html.contains("<th scope=\"col\">a</th><th scope=\"col\">b</th>"));
        assert!(html.contains("<tr><td class=\"num\">1</td><td>x&lt;y</td></tr>"));
        // Contents link each section on the page.
        assert!(html.contains("<li><a href=\"#section-2\">Tables</a></li>"));
        assert!(html.contains("<section id=\"section-2\">\n<h2>Tables</h2>"));
        assert!(html.find("<h2>Charts</h2>").unwrap() < html.find("<h2>Tables</h2>").unwrap());
    }

    #[test]
    fn nothing_is_fetched() {
        let mut page = Page::new("t", "i");
        page.section("s").table("t", Table { columns: vec!["c".into()], rows: vec![vec!["1".into()]] });
        let html = page.render();
        // In-page links only (the contents).
        let outside = html.replace("href=\"#", "");
        for needle in ["http://", "https://", "src=", "href=", "@import", "url("] {
            assert!(!outside.contains(needle), "the page refers outside itself: {needle}");
        }
    }

    #[test]
    fn money_in_dollars_shares_in_percent_numbers_right_and_empty_tables_say_none() {
        let table = Table::from_csv(
            "case,cost_nanousd,savings,misses
warm,93420000,0.8970,
",
        )
        .unwrap()
        .for_reading(&["savings"]);
        assert_eq!(table.columns, ["case", "cost_usd", "savings", "misses"]);
        // 93,420,000 nano-dollars = $0.093420; a share of 0.8970 = 89.7%.
        assert_eq!(table.rows[0], ["warm", "$0.093420", "89.7%", ""]);
        let mut page = Page::new("t", "i");
        page.headline("$1 saved");
        page.section("s").table("t", table).table("empty", Table { columns: vec!["c".into()], rows: vec![] });
        let html = page.render();
        assert!(html.contains("<p class=\"headline\">$1 saved</p>"));
        assert!(
            html.contains(
                "<td>warm</td><td class=\"num\">$0.093420</td><td class=\"num\">89.7%</td><td></td>"
            )
        );
        assert!(html.contains("<p>empty: none</p>"));
        assert!(html.find("headline").unwrap() < html.find("<nav>").unwrap());
    }
}
