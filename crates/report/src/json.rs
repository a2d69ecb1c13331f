//! `--format json`: the record itself, pretty-printed. Several records
//! become a JSON array in the order given (use `--merge` for one record).

use crate::Input;

pub fn render(inputs: &[Input]) -> Vec<u8> {
    let mut s = if inputs.len() == 1 {
        inputs[0].record.to_json_pretty()
    } else {
        let all: Vec<&punctual_record::Record> = inputs.iter().map(|i| &i.record).collect();
        serde_json::to_string_pretty(&all).unwrap_or_default()
    };
    s.push('\n');
    s.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use punctual_record::{Platform, Record, Source};

    #[test]
    fn one_record_reads_back() {
        let r = Record::new(Source::Simulated, "simulate", Platform::default());
        let out = render(&[Input::new("x", r.clone())]);
        let back = Record::from_json(std::str::from_utf8(&out).unwrap()).unwrap();
        assert_eq!(back, r);
        let two = render(&[Input::new("x", r.clone()), Input::new("y", r)]);
        let v: serde_json::Value = serde_json::from_slice(&two).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 2);
    }
}
