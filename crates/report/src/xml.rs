//! A thin front over `quick-xml`'s writer so every element, attribute and
//! text node of the HTML and SVG goes through the library's escaping.
//!
//! Strings from the system (process names, IRQ names, scenario names) end
//! up in reports; writing markup by formatting strings is how a process
//! named `<script>` becomes code. Nothing here takes pre-escaped text except
//! [`Xml::trusted_static`], which only accepts `&'static str` constants of
//! this crate (the style sheet).

use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::Writer;

pub struct Xml {
    w: Writer<Vec<u8>>,
}

impl Default for Xml {
    fn default() -> Self {
        Self::new()
    }
}

impl Xml {
    pub fn new() -> Self {
        Xml {
            w: Writer::new(Vec::new()),
        }
    }

    fn ev(&mut self, e: Event<'_>) {
        // Writing into a Vec<u8> cannot fail.
        let _ = self.w.write_event(e);
    }

    pub fn xml_decl(&mut self) {
        self.ev(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    }

    pub fn doctype_html(&mut self) {
        self.ev(Event::DocType(BytesText::from_escaped("html")));
    }

    pub fn open(&mut self, tag: &str, attrs: &[(&str, &str)]) {
        let mut s = BytesStart::new(tag);
        for (k, v) in attrs {
            s.push_attribute((*k, *v));
        }
        self.ev(Event::Start(s));
    }

    pub fn close(&mut self, tag: &str) {
        self.ev(Event::End(BytesEnd::new(tag)));
    }

    /// A self-closed element: only for SVG and HTML void elements.
    pub fn empty(&mut self, tag: &str, attrs: &[(&str, &str)]) {
        let mut s = BytesStart::new(tag);
        for (k, v) in attrs {
            s.push_attribute((*k, *v));
        }
        self.ev(Event::Empty(s));
    }

    pub fn text(&mut self, s: &str) {
        self.ev(Event::Text(BytesText::new(s)));
    }

    /// `<tag attrs>text</tag>`.
    pub fn leaf(&mut self, tag: &str, attrs: &[(&str, &str)], text: &str) {
        self.open(tag, attrs);
        self.text(text);
        self.close(tag);
    }

    /// Unescaped text, for this crate's own constants (CSS) only: the
    /// `'static` bound keeps run-time strings out.
    pub fn trusted_static(&mut self, s: &'static str) {
        self.ev(Event::Text(BytesText::from_escaped(s)));
    }

    /// Appends another document fragment written with this same writer.
    pub fn fragment(&mut self, other: Xml) {
        let bytes = other.w.into_inner();
        self.w.get_mut().extend_from_slice(&bytes);
    }

    pub fn into_string(self) -> String {
        // Only valid UTF-8 &str went in.
        String::from_utf8(self.w.into_inner()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_attributes_are_escaped() {
        let mut x = Xml::new();
        x.open("p", &[("title", "\"><script>alert(1)</script>")]);
        x.text("<img src=x onerror=alert(1)>");
        x.close("p");
        let s = x.into_string();
        assert!(!s.contains("<script"), "{s}");
        assert!(!s.contains("<img"), "{s}");
        assert!(s.contains("&lt;img src=x onerror=alert(1)&gt;"), "{s}");
    }
}
