// The book's search ranking (Sphinx's html_search_scorer, set by book/_ext/reading.py):
// Sphinx's own weights, except that the glossary's entries (its terms are index entries and
// objects, which Sphinx ranks above any page's text) come after the chapters that use them.
var Scorer = {
  score: (result) => {
    const [docname, , , , score] = result;
    return docname.endsWith("book/glossary") ? Math.min(score, Scorer.term - 1) : score;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {0: 15, 1: 5, 2: -5},
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
