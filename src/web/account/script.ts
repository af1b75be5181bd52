// The one script of the account pages, served from the server itself (the pages' content security
// policy allows no other): it hands the browser's WebAuthn API the options the server made and
// posts the answer back in the form, as a person pressing the button would. Without it, the pages
// say that passkeys need JavaScript and everything else still works.
export const PASSKEY_SCRIPT = `'use strict';
(function () {
  var toBuf = function (s) {
    s = s.replace(/-/g, '+').replace(/_/g, '/');
    while (s.length % 4) s += '=';
    var bin = atob(s), a = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) a[i] = bin.charCodeAt(i);
    return a.buffer;
  };
  var toB64u = function (buf) {
    if (!buf) return undefined;
    var a = new Uint8Array(buf), s = '';
    for (var i = 0; i < a.length; i++) s += String.fromCharCode(a[i]);
    return btoa(s).replace(/\\+/g, '-').replace(/\\//g, '_').replace(/=+$/, '');
  };
  var ids = function (list) {
    return (list || []).map(function (c) { return Object.assign({}, c, { id: toBuf(c.id) }); });
  };
  var supported = typeof window.PublicKeyCredential === 'function' && !!navigator.credentials;
  document.querySelectorAll('[data-passkey]').forEach(function (btn) {
    var form = btn.closest('form');
    if (!supported || !form) return;
    btn.hidden = false;
    form.querySelectorAll('[data-needs-script]').forEach(function (e) { e.hidden = true; });
    var say = function (text) {
      var p = form.querySelector('.passkey-error');
      if (!p) {
        p = document.createElement('p');
        p.className = 'alert passkey-error';
        p.setAttribute('role', 'alert');
        form.insertBefore(p, form.firstChild);
      }
      p.textContent = text;
    };
    btn.addEventListener('click', function () {
      btn.disabled = true;
      var csrf = form.querySelector('input[name=csrf_token]').value;
      fetch(btn.getAttribute('data-options'), {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ csrf_token: csrf }).toString(),
      })
        .then(function (res) {
          return res.json().then(function (body) {
            if (res.ok) return body;
            if (body && body.location) window.location.href = body.location;
            throw new Error((body && body.error) || 'The server refused');
          });
        })
        .then(function (o) {
          if (btn.getAttribute('data-passkey') === 'register') {
            o.challenge = toBuf(o.challenge);
            o.user.id = toBuf(o.user.id);
            o.excludeCredentials = ids(o.excludeCredentials);
            return navigator.credentials.create({ publicKey: o }).then(function (c) {
              var r = c.response;
              return {
                id: c.id, rawId: toB64u(c.rawId), type: c.type,
                authenticatorAttachment: c.authenticatorAttachment || undefined,
                clientExtensionResults: c.getClientExtensionResults(),
                response: {
                  clientDataJSON: toB64u(r.clientDataJSON),
                  attestationObject: toB64u(r.attestationObject),
                  transports: r.getTransports ? r.getTransports() : [],
                },
              };
            });
          }
          o.challenge = toBuf(o.challenge);
          o.allowCredentials = ids(o.allowCredentials);
          return navigator.credentials.get({ publicKey: o }).then(function (c) {
            var r = c.response;
            return {
              id: c.id, rawId: toB64u(c.rawId), type: c.type,
              authenticatorAttachment: c.authenticatorAttachment || undefined,
              clientExtensionResults: c.getClientExtensionResults(),
              response: {
                clientDataJSON: toB64u(r.clientDataJSON),
                authenticatorData: toB64u(r.authenticatorData),
                signature: toB64u(r.signature),
                userHandle: toB64u(r.userHandle),
              },
            };
          });
        })
        .then(function (answer) {
          form.querySelector('input[name=response]').value = JSON.stringify(answer);
          form.submit();
        })
        .catch(function (err) {
          btn.disabled = false;
          say('The passkey request did not complete: ' + (err && err.message ? err.message : err));
        });
    });
  });
  var first = document.querySelector('#error, #notice');
  // the message of the form just sent, in the section the page scrolled to
  if (first) first.focus();
})();
`
