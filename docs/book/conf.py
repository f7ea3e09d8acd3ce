"""Sphinx configuration of the book (``make book``; docs/book/README.md).

``flkit.reproduce.book`` copies this file into the source folder it assembles (with the index
page, the executed notebooks, the results page, the paper READMEs and _static/mathjax) and runs
Sphinx there; nothing here executes a notebook."""

project = "flkit"
author = "flkit"
copyright = "flkit contributors (MIT)"
html_title = "flkit: a federated-learning workbook"
html_last_updated_fmt = None

extensions = ["myst_nb"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# The notebooks come executed from `flkit reproduce`; the book only renders their stored outputs.
nb_execution_mode = "off"
# The papermill cell that sets preset and seed is shown: it says what the outputs were made at.
nb_merge_streams = True
# A cell's Markdown output (display(Markdown(...))) is read as the notebook's own Markdown cells
# are, tables and formulas included, as JupyterLab shows it; MyST-NB's default, plain CommonMark,
# has no tables: 01's settings table would show as lines of pipes.
nb_render_markdown_format = "myst"

myst_enable_extensions = ["dollarmath", "amsmath", "html_image"]
# $$...$$ inside a paragraph is display math, as JupyterLab renders it (04's and 05's equations)
myst_dmath_double_inline = True
myst_heading_anchors = 3
# The results page links to raw-HTML anchors (<a id="...">) that MyST cannot see; the book's own
# link check (flkit.reproduce.book.check_site) checks every link and anchor in the built HTML.
suppress_warnings = ["myst.xref_missing"]

html_theme = "sphinx_book_theme"
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": True,
    "home_page_in_toc": True,
    "navigation_with_keys": False,
    # the sidebar has the search field; without this the theme adds a second one in a top bar
    "navbar_persistent": [],
}
html_show_sourcelink = False

# MathJax from the site itself (_static/mathjax, copied from jupyter-server-mathjax), so that the
# book renders its formulas offline, as in a classroom without internet.
html_static_path = ["_static"]
# the book's own styles (book.css, copied from docs/book beside MathJax)
html_css_files = ["book.css"]
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
# MyST-NB marks each notebook section tex2jax_ignore (its $...$ is already parsed into math
# spans); MathJax 2 then typesets the spans of class "math" alone, as Sphinx documents for it.
# The package ships the STIX-Web fonts only (as Jupyter's classic notebook uses them).
mathjax2_config = {
    "HTML-CSS": {
        "availableFonts": [],
        "webFont": "STIX-Web",
        "imageFont": None,
        "preferredFont": None,
        # a long display formula breaks at the column's width instead of being cut off
        "linebreaks": {"automatic": True},
    },
    "tex2jax": {
        "inlineMath": [["\\(", "\\)"]],
        "displayMath": [["\\[", "\\]"]],
        "ignoreClass": "document|tex2jax_ignore|mathjax_ignore",
        "processClass": "math|output_area",
        "processEscapes": True,
    },
}
