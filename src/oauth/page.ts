// The sign-in and consent page of /oauth/authorize: a plain HTML form that works
// without JavaScript, posting handle, password, csrf_token and action=allow|deny. Authorize comes
// first in the form so that pressing Enter signs in; the layout shows it on the right.

const SCOPE_WORDS: Record<string, string> = {
  atproto: 'Know who you are on the network (your DID and handle)',
  'transition:generic':
    'Act on your account: read and write your posts, likes, follows and other records, upload files, and change account settings',
}

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!)

export function describeScopes(scope: string): string[] {
  return scope
    .split(' ')
    .filter(Boolean)
    .map((s) => SCOPE_WORDS[s] ?? s)
}

export type PageInput = {
  action: string
  csrf: string
  clientName: string
  clientId: string
  scope: string
  handle?: string
  error?: string
  serverName: string
}

export function signInPage(p: PageInput): string {
  const scopes = describeScopes(p.scope)
    .map((s) => `<li>${esc(s)}</li>`)
    .join('')
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in to ${esc(p.clientName)}</title>
<style>
body{font-family:system-ui,sans-serif;background:#f4f5f7;margin:0;padding:2rem 1rem;color:#1d2228}
main{max-width:26rem;margin:0 auto;background:#fff;border-radius:12px;padding:1.5rem 1.75rem;box-shadow:0 1px 4px rgba(0,0,0,.12)}
h1{font-size:1.3rem;margin:0 0 .25rem}
.client{color:#555;font-size:.9rem;word-break:break-all;margin:0 0 1rem}
.note{color:#555;font-size:.85rem;margin:1rem 0 0}
ul{padding-left:1.2rem} li{margin:.3rem 0}
label{display:block;margin:.8rem 0 .25rem;font-weight:600}
input[type=text],input[type=password]{width:100%;box-sizing:border-box;padding:.55rem;border:1px solid #bbb;border-radius:6px;font-size:1rem}
.error{background:#fde8e8;color:#8a1c1c;border-radius:6px;padding:.6rem .8rem;margin:0 0 1rem}
.buttons{display:flex;flex-direction:row-reverse;gap:.75rem;margin-top:1.25rem}
button{flex:1;padding:.65rem;font-size:1rem;border-radius:6px;border:1px solid #0a66c2;cursor:pointer}
button[value=allow]{background:#0a66c2;color:#fff} button[value=deny]{background:#fff;color:#0a66c2}
</style>
</head>
<body>
<main>
<h1><span id="client-name">${esc(p.clientName)}</span> wants to access your account</h1>
<p class="client">${esc(p.clientId)}</p>
${p.error ? `<p class="error" role="alert">${esc(p.error)}</p>` : ''}
<p>If you allow it, this application will be able to:</p>
<ul id="scopes">${scopes}</ul>
<form method="post" action="${esc(p.action)}">
<input type="hidden" name="csrf_token" value="${esc(p.csrf)}">
<label for="handle">Handle</label>
<input type="text" id="handle" name="handle" value="${esc(p.handle ?? '')}" autocomplete="username" autocapitalize="none" spellcheck="false" required>
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required>
<div class="buttons">
<button type="submit" name="action" value="allow">Authorize</button>
<button type="submit" name="action" value="deny" formnovalidate>Deny</button>
</div>
</form>
<p class="note">Signing in at ${esc(p.serverName)} with your account password (app passwords are not accepted here).</p>
</main>
</body>
</html>`
}

export function messagePage(title: string, message: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title></head>
<body style="font-family:system-ui,sans-serif;max-width:30rem;margin:3rem auto;padding:0 1rem">
<h1>${esc(title)}</h1><p>${esc(message)}</p></body></html>`
}
