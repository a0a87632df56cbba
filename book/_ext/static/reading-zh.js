// The theme's strings that Sphinx and sphinx-book-theme leave in English (or in traditional
// characters) on the Chinese edition's pages, in Chinese (book/_ext/reading.py adds this
// file to the Chinese edition only). Applied to titles, tooltips, labels and placeholders
// when the page is ready and to what the theme's scripts add afterwards.
(() => {
  const ZH = {
    "Link to this heading": "链接到本节",
    "Link to this term": "链接到本术语",
    "Toggle hidden content": "显示或隐藏内容",
    "Link to this equation": "链接到本公式",
    "Link to this definition": "链接到本定义",
    "Link to this image": "链接到本图",
    "Link to this table": "链接到本表",
    "Link to this code": "链接到本代码",
    "Toggle primary sidebar": "显示或隐藏目录栏",
    "Toggle secondary sidebar": "显示或隐藏本页目录",
    "System Settings": "跟随系统",
    "Color mode": "配色模式",
    "Launch on Colab": "在 Colab 中打开",
    "Launch interactive content": "运行交互内容",
    "Search this book...": "搜索本书……",
    "Search": "搜索",
    "Page": "页面",
    "Main": "主要内容",
    "Skip to main content": "跳到正文",
    "Back to top": "回到顶部",
    "Contents": "目录",
    "列印成 PDF": "打印为 PDF",
    "Copy": "复制",
    "Copy to clipboard": "复制到剪贴板",
    "Copied!": "已复制！",
    "Click to show": "点击显示",
    "Click to hide": "点击隐藏",
    // myst-nb's toggles of hidden code cells (tags hide-cell, hide-input, hide-output)
    "Show code cell content": "显示代码单元",
    "Hide code cell content": "隐藏代码单元",
    "Show code cell source": "显示代码",
    "Hide code cell source": "隐藏代码",
    "Show code cell output": "显示代码输出",
    "Hide code cell output": "隐藏代码输出",
  };
  const ATTRIBUTES = ["title", "aria-label", "placeholder", "data-bs-title",
                      "data-bs-original-title", "data-tooltip"];
  const translate = (root) => {
    const elements = root.querySelectorAll ? [root, ...root.querySelectorAll("*")] : [];
    for (const el of elements) {
      if (!el.getAttribute) continue;
      if (el.closest("a.edition-switch")) continue; // the way to English stays English
      for (const name of ATTRIBUTES) {
        const value = el.getAttribute(name);
        if (value && Object.hasOwn(ZH, value.trim())) el.setAttribute(name, ZH[value.trim()]);
      }
      // Short labels the theme writes as text (no markup inside).
      if (el.childElementCount === 0 && !el.closest("article pre, article code, .cell_output")) {
        const text = el.textContent.trim();
        if (text && Object.hasOwn(ZH, text)) el.textContent = ZH[text];
      }
    }
  };
  const start = () => {
    translate(document.body);
    new MutationObserver((records) => {
      for (const record of records) {
        if (record.type === "attributes") translate(record.target);
        for (const node of record.addedNodes || []) if (node.nodeType === 1) translate(node);
      }
    }).observe(document.body, {subtree: true, childList: true, attributes: true,
                               attributeFilter: ATTRIBUTES});
    document.documentElement.dataset.uiTranslated = "zh";
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
