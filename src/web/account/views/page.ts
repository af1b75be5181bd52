// The account page itself, one section per thing a person manages (a deactivated account sees
// only what it may still do), and the page after a deletion.
import { html, type SafeHtml } from '../../html.js'
import { layout, type ServerInfo } from '../../layout.js'
import { form, messages, sectionMessages, SCRIPT_PATH, type AccountView, type Common } from './common.js'
import { appPasswordsSection, appsSection, emailSection, handleSection, passwordSection } from './access.js'
import { securitySection } from './security.js'
import { spacesSection } from './spaces.js'

function statusSection(c: Common, a: AccountView): SafeHtml {
  const deactivated = a.status === 'deactivated'
  return html`<section class="card" id="status" aria-labelledby="status-h">
    <h2 id="status-h">Deactivate or delete</h2>
    ${sectionMessages(c, 'status')}
    ${
      deactivated
        ? html`<p>Your account is <strong id="account-status">deactivated</strong>: its posts are hidden from the network.</p>
            ${form(c, 'activate', html`<button type="submit" class="primary">Reactivate</button>`)}`
        : html`<p class="muted">Deactivating hides your account from the network until you reactivate it.</p>
            ${form(c, 'deactivate', html`<button type="submit" class="danger">Deactivate</button>`)}`
    }
    ${
      !deactivated &&
      html`
        <h3>Delete your account</h3>
        <p class="muted">Deleting is permanent. We email a code to ${a.email ?? 'your address'} to confirm it.</p>
        ${form(c, 'delete/request', html`<button type="submit" class="danger">${a.pending.deletion ? 'Send a new code' : 'Email me a deletion code'}</button>`)}
        ${
          a.pending.deletion &&
          form(
            c,
            'delete',
            html`<label for="delete-token">Code from the email</label>
              <input
                type="text"
                id="delete-token"
                name="token"
                autocomplete="one-time-code"
                autocapitalize="characters"
                spellcheck="false"
                required
              />
              <label for="delete-password">Password</label>
              <input type="password" id="delete-password" name="password" autocomplete="current-password" required />
              <div class="buttons"><button type="submit" class="danger primary">Delete my account</button></div>`,
          )
        }
      `
    }
  </section>`
}

function dataSection(c: Common): SafeHtml {
  return html`<section class="card" id="data" aria-labelledby="data-h">
    <h2 id="data-h">Your data</h2>
    ${sectionMessages(c, 'data')}
    <p class="muted">
      One archive (.tar) with your repository (every post, like, follow and other record), your images and other files, your preferences and
      a list of what is inside. Another server can import it.
    </p>
    ${form(c, 'export', html`<button type="submit">Download your data</button>`)}
  </section>`
}

export function accountPage(c: Common, a: AccountView, qrSvg?: string): SafeHtml {
  const unlocked = a.unlockedUntil
  return layout({
    title: 'Your account',
    server: c.server,
    wide: true,
    scripts: [SCRIPT_PATH],
    body: html`<div class="row"><h1>Your account</h1></div>
      <p>Signed in as <strong id="account-handle">@${a.handle}</strong> <span class="muted break">${a.did}</span></p>
      ${form(c, 'sign-out', html`<button type="submit" class="link">Sign out on this device</button>`)}
      <nav aria-label="Sections">
        <ul class="toc">
          <li><a href="#apps">Connected apps</a></li>
          <li><a href="#app-passwords">App passwords</a></li>
          <li><a href="#email">Email</a></li>
          <li><a href="#handle">Handle</a></li>
          <li><a href="#password">Password</a></li>
          <li><a href="#security">Second factors</a></li>
          <li><a href="#spaces">Spaces</a></li>
          <li><a href="#data">Your data</a></li>
          <li><a href="#status">Deactivate or delete</a></li>
        </ul>
      </nav>
      ${!c.flash.at && messages(c.flash)}
      <p class="muted" id="unlock-state">
        ${
          unlocked
            ? `Your password was confirmed: sensitive changes need no password until ${unlocked.toISOString().slice(11, 16)} UTC.`
            : 'Sensitive changes (password, email, handle, second factors, app passwords, deactivating, deleting) ask for your password first.'
        }
      </p>
      ${
        a.status === 'deactivated'
          ? html`<p class="notice" id="deactivated">Your account is deactivated. Reactivate it to change its settings.</p>
              ${statusSection(c, a)}${dataSection(c)}${spacesSection(a)}${appsSection(c, a)}${appPasswordsSection(c, a, false)}`
          : html`${appsSection(c, a)}${appPasswordsSection(c, a, true)}${emailSection(c, a)}${handleSection(c, a)}${passwordSection(c)}${securitySection(c, a, qrSvg)}${spacesSection(a)}${dataSection(c)}${statusSection(c, a)}`
      }`,
  })
}

/** after the account was deleted */
export function deletedPage(server: ServerInfo): SafeHtml {
  return layout({
    title: 'Account deleted',
    server,
    body: html`<h1>Your account was deleted</h1>
      <p>Its data is no longer served. You were signed out on this device.</p>`,
  })
}
