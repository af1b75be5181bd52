// The sign-in page's second step, and the "Sign in with a passkey" form of the first one. The code
// field takes whichever code the account has (mailed, from an authenticator app, or a recovery
// code); passkey forms start hidden and show only where the passkey script runs, so without
// JavaScript the page says what else works.
import { html, type SafeHtml } from '../web/html.js'
import { layout } from '../web/layout.js'
import { PASSKEY_SCRIPT_PATH } from '../web/passkey-script.js'
import type { Factors } from '../account/factors/index.js'
import { clientLine, denyButton, hidden, messages, type Flow } from './page.js'

function passkeyForm(f: Flow, p: { step: string; label: string; id: string; remember?: boolean }): SafeHtml {
  return html`<form method="post" action="${f.action}" data-passkey="get" data-passkey-options="${p.step}-options" id="${p.id}" hidden>
    ${hidden(f, p.step, { passkey_response: '', ...(p.remember ? { remember: 'on' } : {}) })}
    <div class="buttons"><button type="submit" id="${p.id}-button">${p.label}</button></div>
    <p class="muted" role="status" data-passkey-status></p>
  </form>`
}

/** "Sign in with a passkey" (no handle, no password), for the first page of a sign-in */
export function passkeySignIn(f: Flow): SafeHtml {
  return html`<div class="alt">
    ${passkeyForm(f, { step: 'passkey', label: 'Sign in with a passkey', id: 'passkey-signin', remember: true })}
    <noscript
      ><p class="muted" id="passkey-needs-js">
        Signing in with a passkey needs JavaScript; your handle and password work without it.
      </p></noscript
    >
  </div>`
}

/** what the code field takes, in the words of the factors the account has */
function codeHint(factors: Factors): string {
  const kinds = [
    factors.emailCode && 'the code we emailed you',
    factors.totp && 'the 6-digit code from your authenticator app',
    factors.recoveryCodesLeft > 0 && 'one of your recovery codes',
  ].filter((k): k is string => !!k)
  if (kinds.length === 0) return ''
  const list = kinds.length === 1 ? kinds[0] : `${kinds.slice(0, -1).join(', ')} or ${kinds[kinds.length - 1]}`
  return `Enter ${list}.`
}

/** the second step: a code field when the account has codes, "Use a passkey" when it has passkeys */
export function factorPage(f: Flow, p: { handle: string; factors: Factors }): SafeHtml {
  const { factors } = p
  const hint = codeHint(factors)
  const codes = hint !== ''
  return layout({
    title: 'Confirm it is you',
    server: f.server,
    scripts: factors.passkeys > 0 ? [PASSKEY_SCRIPT_PATH] : undefined,
    body: html`<h1>Confirm it is you</h1>
      ${clientLine(f)}
      <p>
        Your password for <strong id="account-handle">@${p.handle}</strong> is right. One more step to
        continue${f.client.loopback ? '' : html` to <span id="client-name">${f.client.name}</span>`}.
      </p>
      ${messages(f)}
      ${
        factors.passkeys > 0 &&
        html`${passkeyForm(f, { step: 'factor-passkey', label: 'Use a passkey', id: 'factor-passkey' })}
          <noscript
            ><p class="muted" id="passkey-needs-js">A passkey needs JavaScript.${codes ? ' Enter a code below instead.' : ''}</p></noscript
          >`
      }
      ${
        codes &&
        html`<form method="post" action="${f.action}">
          ${hidden(f, 'factor')}
          <label for="code">Sign-in code <span class="hint" id="code-hint">${hint}</span></label>
          <input
            type="text"
            id="code"
            name="code"
            autocomplete="one-time-code"
            autocapitalize="characters"
            spellcheck="false"
            aria-describedby="code-hint"
            required
            autofocus
          />
          <div class="buttons">
            <button type="submit" class="primary" name="action" value="allow" id="verify">Continue</button>${denyButton}
          </div>
        </form>`
      }
      ${
        factors.emailCode &&
        html`<form method="post" action="${f.action}" class="links">
          ${hidden(f, 'factor-resend')}
          <button type="submit" class="link" id="resend">Email me a new code</button>
        </form>`
      }
      ${
        !codes &&
        html`<form method="post" action="${f.action}">
          ${hidden(f, 'deny')}
          <div class="buttons">${denyButton}</div>
        </form>`
      }
      <div class="links"><a href="${f.link('login')}">Use another account</a></div>`,
  })
}

/** the first passkey sign-in after a password change: the password, once, for the account the passkey named */
export function passwordAgainPage(f: Flow, p: { handle: string }): SafeHtml {
  return layout({
    title: 'Enter your password',
    server: f.server,
    body: html`<h1>Enter your password</h1>
      ${clientLine(f)}
      <p>Your passkey for <strong id="account-handle">@${p.handle}</strong> is right. One more step to continue.</p>
      ${messages(f)}
      <form method="post" action="${f.action}">
        ${hidden(f, 'passkey-password')}
        <label for="password">Password</label>
        <input type="password" id="password" name="password" autocomplete="current-password" required autofocus />
        <div class="buttons">
          <button type="submit" class="primary" name="action" value="allow" id="verify">Continue</button>${denyButton}
        </div>
      </form>
      <div class="links"><a href="${f.link('login')}">Use another account</a></div>`,
  })
}
