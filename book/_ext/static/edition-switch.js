// The language switch (edition_switch.py) keeps where the reader is: the search query
// (search.html?q=...) and the section. Both editions have the same sections in the same
// order, but a section's anchor is made from its heading, so it differs between them: the
// link carries the section's place in the page (edition-section=N) with the anchor, and the
// other page scrolls to its N-th section when it has no element with that anchor.
(() => {
  const SECTIONS = "article section[id]";
  const PARAM = "edition-section";

  const sectionIndex = (id) => {
    const target = id && document.getElementById(id);
    const section = target && (target.matches("section") ? target : target.closest("section"));
    return section ? Array.from(document.querySelectorAll(SECTIONS)).indexOf(section) : -1;
  };

  const update = (link) => {
    const url = new URL(link.dataset.editionHref || link.getAttribute("href"), location.href);
    link.dataset.editionHref = link.dataset.editionHref || link.getAttribute("href");
    const params = new URLSearchParams(location.search);
    params.delete(PARAM);
    const id = decodeURIComponent(location.hash.slice(1));
    const index = sectionIndex(id);
    if (index >= 0) params.set(PARAM, String(index));
    url.search = params.toString();
    url.hash = location.hash;
    link.href = url.href;
  };

  const arrive = () => {
    const params = new URLSearchParams(location.search);
    if (!params.has(PARAM)) return;
    const index = Number(params.get(PARAM));
    params.delete(PARAM);
    const id = decodeURIComponent(location.hash.slice(1));
    let target = id && document.getElementById(id);
    if (!target) target = document.querySelectorAll(SECTIONS)[index];
    const query = params.toString();
    const hash = target ? "#" + encodeURIComponent(target.id) : location.hash;
    history.replaceState(null, "", location.pathname + (query ? "?" + query : "") + hash);
    if (target) target.scrollIntoView();
  };

  const start = () => {
    const links = document.querySelectorAll("a.edition-switch");
    const refresh = () => links.forEach(update);
    refresh();
    window.addEventListener("hashchange", refresh);
    links.forEach((link) => link.addEventListener("click", () => update(link)));
    arrive();
    refresh();
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
