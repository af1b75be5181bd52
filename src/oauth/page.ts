// The pages of /oauth/authorize, on the server's one layout: the accounts remembered on this
// device, the password form, the consent page, sign-up and a forgotten password. Each is a plain
// form posting back to the same URL with a `step` field; nothing needs JavaScript.
import { html, type SafeHtml } from '../web/html.js'
import { layout, type ServerInfo } from '../web/layout.js'
import { CSRF_FIELD } from '../web/csrf.js'
import type { DeviceAccount } from '../web/devices.js'
import type { ConsentWords } from './consent-words.js'
import { PASSKEY_SCRIPT_PATH } from '../web/passkey-script.js'
import { credentialFields, initials } from '../web/sign-in/fields.js'

/** what the pages show of the app asking */
export type ClientView = {
  id: string
  name: string
  loopback: boolean
  logoUri?: string
  clientUri?: string
  tosUri?: string
  policyUri?: string
}

/** what every page of one sign-in shares */
export type Flow = {
  server: ServerInfo
  client: ClientView
  /** the form's action, with the request_uri */
  action: string
  /** GET links to the other views of this sign-in */
  link: (view: string, extra?: Record<string, string>) => string
  csrf: string
  error?: string
  notice?: string
}

const field = (name: string, value: string) => html`<input type="hidden" name="${name}" value="${value}" />`

export function hidden(f: Flow, step: string, extra: Record<string, string> = {}): SafeHtml {
  return html`${field(CSRF_FIELD, f.csrf)}${field('step', step)}${Object.entries(extra).map(([k, v]) => field(k, v))}`
}

export function messages(f: Flow): SafeHtml {
  return html`${f.error && html`<p class="alert" role="alert" id="error">${f.error}</p>`}${f.notice && html`<p class="notice" role="status" id="notice">${f.notice}</p>`}`
}

/** where the app comes from (a loopback app's name already says it) */
export function clientLine(f: Flow): SafeHtml {
  return f.client.loopback ? html`` : html`<p class="muted break">${new URL(f.client.id).host}</p>`
}

export const denyButton = html`<button type="submit" name="action" value="deny" formnovalidate>Cancel</button>`

/** the accounts remembered on this device */
export function pickerPage(f: Flow, accounts: DeviceAccount[], passkey?: SafeHtml): SafeHtml {
  const rows = accounts.map(
    (a) =>
      html`<li>
        <form method="post" action="${f.action}" class="pick">
          ${hidden(f, 'select', { did: a.did })}
          <button type="submit" class="account" name="action" value="allow">
            <span class="initials" aria-hidden="true">${initials(a.handle)}</span><span>@${a.handle}</span>
          </button>
        </form>
        <form method="post" action="${f.action}">
          ${hidden(f, 'forget', { did: a.did })}
          <button type="submit" class="link" name="action" value="forget" aria-label="Forget @${a.handle} on this device">Forget</button>
        </form>
      </li>`,
  )
  return layout({
    title: 'Choose an account',
    server: f.server,
    scripts: passkey ? [PASSKEY_SCRIPT_PATH] : undefined,
    body: html`<h1>Choose an account to continue to <span id="client-name">${f.client.name}</span></h1>
      ${clientLine(f)}${messages(f)}
      <ul class="accounts" id="accounts">
        ${rows}
      </ul>
      ${passkey}
      <div class="links">
        <a href="${f.link('login')}" id="other-account">Use another account</a>
        <a href="${f.link('signup')}">Create an account</a>
      </div>
      <form method="post" action="${f.action}">
        ${hidden(f, 'deny')}
        <div class="buttons">${denyButton}</div>
      </form>`,
  })
}

/** handle (or email) and password */
export function loginPage(f: Flow, p: { handle?: string; remember: boolean; hasAccounts: boolean; passkey?: SafeHtml }): SafeHtml {
  return layout({
    title: `Sign in to ${f.client.name}`,
    server: f.server,
    scripts: p.passkey ? [PASSKEY_SCRIPT_PATH] : undefined,
    body: html`<h1>Sign in to continue to <span id="client-name">${f.client.name}</span></h1>
      ${clientLine(f)}${messages(f)}
      <form method="post" action="${f.action}">
        ${hidden(f, 'login')} ${credentialFields(p.handle)}
        <label class="check"
          ><input type="checkbox" name="remember" value="on" id="remember" ${p.remember ? html` checked` : ''} /> Remember this account on
          this device</label
        >
        <div class="buttons"><button type="submit" class="primary" name="action" value="allow">Sign in</button>${denyButton}</div>
      </form>
      ${p.passkey}
      <div class="links">
        <a href="${f.link('reset')}">Forgot password?</a>
        <a href="${f.link('signup')}">Create an account</a>
        ${p.hasAccounts && html`<a href="${f.link('select')}">Back to saved accounts</a>`}
      </div>`,
  })
}

/** what the app asks for, in plain words, then Accept or Deny */
export function consentPage(f: Flow, p: { did: string; handle: string; words: ConsentWords; scope: string }): SafeHtml {
  const c = f.client
  const links = [
    c.clientUri && html`<a href="${c.clientUri}" rel="noreferrer" id="client-uri">Website</a>`,
    c.tosUri && html`<a href="${c.tosUri}" rel="noreferrer" id="client-tos">Terms of service</a>`,
    c.policyUri && html`<a href="${c.policyUri}" rel="noreferrer" id="client-policy">Privacy policy</a>`,
  ].filter(Boolean)
  const groups = p.words.groups.map(
    (g) =>
      html`<li data-kind="${g.kind}">
        <strong>${g.title}</strong>
        <ul>
          ${g.items.map((i) => html`<li>${i}</li>`)}
        </ul>
      </li>`,
  )
  const sets = p.words.sets.map(
    (s) =>
      html`<li data-kind="set" data-nsid="${s.nsid}">
        <strong>${s.title}</strong>${s.detail && html`<p>${s.detail}</p>`}${
          s.items.length > 0 &&
          html`<ul>
            ${s.items.map((i) => html`<li>${i}</li>`)}
          </ul>`
        }
      </li>`,
  )
  return layout({
    title: `Allow ${c.name}?`,
    server: f.server,
    body: html`<div class="client">
        ${c.logoUri && html`<img src="${c.logoUri}" alt="" id="client-logo" />`}
        <div>
          <h1><span id="client-name">${c.name}</span> wants to access your account</h1>
          ${!c.loopback && html`<p class="muted break" id="client-id">${c.id}</p>`}
        </div>
      </div>
      ${links.length > 0 && html`<div class="links">${links}</div>`} ${messages(f)}
      <p>Signed in as <strong id="account-handle">@${p.handle}</strong>. <a href="${f.link('select')}">Not you?</a></p>
      ${p.words.warnings.map((w) => html`<p class="alert" role="alert" data-kind="warning">${w}</p>`)}
      <h2>If you allow it, this app can:</h2>
      <ul class="perms" id="permissions">
        ${sets}${groups}
      </ul>
      <details>
        <summary>Show the exact permissions requested</summary>
        <p><code id="raw-scope">${p.scope}</code></p>
      </details>
      <form method="post" action="${f.action}">
        ${hidden(f, 'consent', { did: p.did })}
        <div class="buttons">
          <button type="submit" class="primary" name="action" value="allow" id="accept">Allow</button
          ><button type="submit" name="action" value="deny" id="deny">Deny</button>
        </div>
      </form>`,
  })
}

/** a new account on this server, made inside the sign-in */
export function signupPage(
  f: Flow,
  p: { name?: string; domain?: string; email?: string; domains: string[]; inviteRequired: boolean; inviteCode?: string; remember: boolean },
): SafeHtml {
  const domainField =
    p.domains.length === 1
      ? html`<span class="muted" id="handle-domain">${p.domains[0]}</span><input type="hidden" name="domain" value="${p.domains[0]}" />`
      : html`<select name="domain" aria-label="Handle domain">
          ${p.domains.map((d) => html`<option value="${d}" ${d === p.domain ? html` selected` : ''}>${d}</option>`)}
        </select>`
  return layout({
    title: 'Create an account',
    server: f.server,
    body: html`<h1>Create an account on ${f.server.name}</h1>
      <p class="muted">Then continue to <span id="client-name">${f.client.name}</span>.</p>
      ${messages(f)}
      <form method="post" action="${f.action}">
        ${hidden(f, 'signup')}
        <label for="name">Handle <span class="hint">Letters, digits and hyphens.</span></label>
        <div class="suffix">
          <input
            type="text"
            id="name"
            name="name"
            value="${p.name ?? ''}"
            autocapitalize="none"
            spellcheck="false"
            autocomplete="username"
            required
            autofocus
          />${domainField}
        </div>
        <label for="email">Email</label>
        <input type="email" id="email" name="email" value="${p.email ?? ''}" autocomplete="email" required />
        <label for="password">Password <span class="hint">At least 8 characters.</span></label>
        <input type="password" id="password" name="password" autocomplete="new-password" minlength="8" required />
        ${p.inviteRequired && html`<label for="invite">Invite code</label><input type="text" id="invite" name="invite_code" value="${p.inviteCode ?? ''}" autocapitalize="none" spellcheck="false" required />`}
        <label class="check"
          ><input type="checkbox" name="remember" value="on" ${p.remember ? html` checked` : ''} /> Remember this account on this
          device</label
        >
        <div class="buttons"><button type="submit" class="primary" name="action" value="allow">Create account</button>${denyButton}</div>
      </form>
      <div class="links"><a href="${f.link('login')}">I already have an account</a></div>`,
  })
}

/** step one of a forgotten password: the address to mail a code to */
export function resetRequestPage(f: Flow, p: { email?: string }): SafeHtml {
  return layout({
    title: 'Reset your password',
    server: f.server,
    body: html`<h1>Reset your password</h1>
      ${messages(f)}
      <p>Enter the email address of your account. We will send you a code to set a new password.</p>
      <form method="post" action="${f.action}">
        ${hidden(f, 'reset-request')}
        <label for="email">Email</label>
        <input type="email" id="email" name="email" value="${p.email ?? ''}" autocomplete="email" required autofocus />
        <div class="buttons"><button type="submit" class="primary" name="action" value="allow">Send code</button></div>
      </form>
      <div class="links">
        <a href="${f.link('reset-token')}">I already have a code</a><a href="${f.link('login')}">Back to sign in</a>
      </div>`,
  })
}

/** step two: the mailed code and the new password */
export function resetPage(f: Flow): SafeHtml {
  return layout({
    title: 'Choose a new password',
    server: f.server,
    body: html`<h1>Choose a new password</h1>
      ${messages(f)}
      <form method="post" action="${f.action}">
        ${hidden(f, 'reset')}
        <label for="token">Code from the email</label>
        <input
          type="text"
          id="token"
          name="token"
          autocomplete="one-time-code"
          autocapitalize="characters"
          spellcheck="false"
          required
          autofocus
        />
        <label for="password">New password <span class="hint">At least 8 characters.</span></label>
        <input type="password" id="password" name="password" autocomplete="new-password" minlength="8" required />
        <div class="buttons"><button type="submit" class="primary" name="action" value="allow">Set password</button></div>
      </form>
      <div class="links"><a href="${f.link('reset')}">Send a new code</a><a href="${f.link('login')}">Back to sign in</a></div>`,
  })
}
