// GET /: a short page that names the service and says what it is, with the way to /account and,
// for people arriving from an app, the address to give it as the hosting provider.
import type { Config } from '../config.js'
import { html, type SafeHtml } from './html.js'
import { layout, serverInfo } from './layout.js'

export function homePage(config: Pick<Config, 'branding' | 'publicUrl' | 'links'>): SafeHtml {
  const server = serverInfo(config)
  return layout({
    title: 'Home',
    server,
    body: html`<h1>${server.name}</h1>
      <p>This is an AT Protocol Personal Data Server: it hosts accounts of the network Bluesky runs on, their posts, media and identity.</p>
      <p>
        To use it from an app, choose <strong>${config.publicUrl}</strong> as your hosting provider when you sign in or create an account.
      </p>
      <div class="links">
        <a href="/account" id="account-link">Manage your account</a>
        ${config.links.contactEmail && html`<a href="mailto:${config.links.contactEmail}" id="contact-link">Contact</a>`}
      </div>`,
  })
}
