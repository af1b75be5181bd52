// The server's own web pages share this: the stylesheet, the operator's brand stylesheet, the
// passkey script and the home page. Pages use layout.ts, html.ts, headers.ts, cookies.ts, csrf.ts
// and devices.ts directly.
import { Router } from 'express'
import type { Config } from '../config.js'
import { STYLESHEET } from './style.js'
import { BRAND_STYLESHEET_PATH, STYLESHEET_PATH } from './layout.js'
import { PASSKEY_SCRIPT, PASSKEY_SCRIPT_PATH } from './passkey-script.js'
import { brandStylesheet } from './brand.js'
import { homePage } from './home.js'
import { LOGO_ORIGIN, sendPage } from './headers.js'

export function webRoutes(config: Pick<Config, 'branding' | 'publicUrl' | 'links'>): Router {
  const r = Router()
  const brandCss = brandStylesheet(config.branding)
  const logoOrigin = config.branding.logoUrl ? new URL(config.branding.logoUrl).origin : undefined
  // every page shows the logo: its origin joins the pages' image sources
  if (logoOrigin) {
    r.use((_req, res, next) => {
      res.locals[LOGO_ORIGIN] = logoOrigin
      next()
    })
  }
  r.get(BRAND_STYLESHEET_PATH, (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=3600')
    res.setHeader('X-Content-Type-Options', 'nosniff')
    res.type('text/css').send(brandCss)
  })
  r.get(STYLESHEET_PATH, (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=3600')
    res.setHeader('X-Content-Type-Options', 'nosniff')
    res.type('text/css').send(STYLESHEET)
  })
  r.get(PASSKEY_SCRIPT_PATH, (_req, res) => {
    res.setHeader('Cache-Control', 'public, max-age=3600')
    res.setHeader('X-Content-Type-Options', 'nosniff')
    res.type('text/javascript').send(PASSKEY_SCRIPT)
  })
  return r
}

/** GET /, mounted after the pages' rate limits like every other page */
export function homeRoutes(config: Pick<Config, 'branding' | 'publicUrl' | 'links'>): Router {
  return Router().get('/', (_req, res) => sendPage(res, homePage(config)))
}
