/*
 * @gpu-kernel-course/cuda-cells: a notebook cell that starts with `%%cuda` is highlighted as C++.
 *
 * A prebuilt JupyterLab 4 extension written by hand: no node, no build, nothing to install.
 * JupyterLab loads it as it loads any prebuilt extension (a webpack module-federation
 * container: `init(shareScope)`, then `get('./extension')`), and it takes JupyterLab's own
 * copies of @jupyterlab/codemirror, @codemirror/language and @lezer/common from the share
 * scope, so it adds no code of its own beyond this file.
 *
 * How: JupyterLab gives every code cell of a Python notebook the `ipython` language. This
 * wraps that language's parser with Lezer's parseMixed: when the cell's first line is a
 * `%%cuda` magic, the rest of the cell is parsed by JupyterLab's C++ parser (the one it uses
 * for .cpp files) and highlighted as C++; every other cell is parsed as before.
 *
 * The file name carries a hash of this file (tests/test_lab.py checks it), so a browser never
 * keeps a stale copy: after editing, rename the file and update package.json as the test says.
 */
(function () {
  'use strict';
  var NAME = '@gpu-kernel-course/cuda-cells';
  var CUDA_MAGIC = /^%%cuda\b[^\n]*(\n|$)/;
  var shareScope = null;

  // webpack's rule for a singleton: the version already loaded, else the newest
  function newer(a, b) {
    var x = a.split(/[.-]/), y = b.split(/[.-]/);
    for (var i = 0; i < Math.max(x.length, y.length); i++) {
      var p = parseInt(x[i] || '0', 10), q = parseInt(y[i] || '0', 10);
      if (p !== q) return q > p;
    }
    return false;
  }

  function shared(name) {
    var versions = shareScope && shareScope[name];
    if (!versions) return Promise.reject(new Error(NAME + ': JupyterLab does not share ' + name));
    var best = Object.keys(versions).reduce(function (a, b) {
      return !a || (!versions[a].loaded && newer(a, b)) ? b : a;
    }, null);
    var entry = versions[best];
    entry.loaded = 1;
    return Promise.resolve(entry.get()).then(function (factory) { return factory(); });
  }

  // The ipython language, with %%cuda cells handed to the C++ parser.
  function withCuda(python, cpp, language, lezer) {
    var cppParser = cpp.language.parser;
    var mixed = python.language.configure({
      wrap: lezer.parseMixed(function (node, input) {
        if (!node.type.isTop) return null;
        var head = CUDA_MAGIC.exec(input.read(0, Math.min(input.length, 400)));
        if (!head || head[0].length >= input.length) return null;
        return { parser: cppParser, overlay: [{ from: head[0].length, to: input.length }] };
      })
    });
    return new language.LanguageSupport(mixed, python.support);
  }

  function activate(languages, language, lezer) {
    var spec = languages.findByName('ipython');
    if (!spec) {
      console.warn(NAME + ': no ipython language to extend');
      return;
    }
    var original = spec.load.bind(spec);
    var loading = null;
    // JupyterLab asks spec.load() for the language the first time a cell needs it
    spec.load = function () {
      if (!loading) {
        loading = Promise.all([original(), languages.getLanguage('text/x-c++src')]).then(function (got) {
          spec.support = withCuda(got[0], got[1].support, language, lezer);
          return spec.support;
        });
      }
      return loading;
    };
    if (spec.support) {     // already loaded by an editor opened before this plugin
      spec.support = undefined;
      spec.load();
    }
  }

  function plugin(codemirror, language, lezer) {
    return {
      id: NAME + ':plugin',
      description: 'Highlights %%cuda cells as C++.',
      autoStart: true,
      requires: [codemirror.IEditorLanguageRegistry],
      activate: function (app, languages) { activate(languages, language, lezer); }
    };
  }

  var container = {
    init: function (scope) { shareScope = scope; },
    get: function (module) {
      if (module !== './extension') return Promise.reject(new Error(NAME + ' has no module ' + module));
      return Promise.all([shared('@jupyterlab/codemirror'), shared('@codemirror/language'), shared('@lezer/common')])
        .then(function (m) {
          return function () { return { __esModule: true, default: plugin(m[0], m[1], m[2]) }; };
        });
    }
  };
  var registry = (window._JUPYTERLAB = window._JUPYTERLAB || {});
  registry[NAME] = container;
})();
