// The request each email provider's HTTP API takes for one message: its plain text, and its HTML
// alternative when the message has one (the branded wrapper adds it).
import type { Mail } from './message.js'
import type { Flavor } from '../config.js'
import { signV4 } from './sigv4.js'

export type Provider = { flavor: Flavor; url: string; token: string; from: string; sesRegion?: string }
export type OutgoingRequest = { url: string; headers: Record<string, string>; body: string }

const json = (auth: Record<string, string>, body: unknown, url: string): OutgoingRequest => ({
  url,
  headers: { 'content-type': 'application/json', accept: 'application/json', ...auth },
  body: JSON.stringify(body),
})

export function buildRequest(p: Provider, mail: Mail, now = new Date()): OutgoingRequest {
  const replyTo = mail.replyTo ?? p.from
  const bearer = { authorization: `Bearer ${p.token}` }
  // only a message with an HTML part names one: a plain message keeps its exact request
  const h = <T extends object>(field: T) => (mail.html !== undefined ? field : {})
  switch (p.flavor) {
    // the generic and postmark bodies carry exactly their five documented fields, so a relay that
    // checks them strictly keeps working; the text part carries the branding
    case 'generic':
      return json(bearer, { from: p.from, to: mail.to, subject: mail.subject, text: mail.text, replyTo }, p.url)
    case 'postmark':
      // Postmark reads its own header; the bearer is kept for relays that expect one
      return json(
        { ...bearer, 'x-postmark-server-token': p.token },
        { From: p.from, To: mail.to, Subject: mail.subject, TextBody: mail.text, ReplyTo: replyTo },
        p.url,
      )
    case 'resend':
      return json(
        bearer,
        { from: p.from, to: [mail.to], subject: mail.subject, text: mail.text, ...h({ html: mail.html }), reply_to: replyTo },
        p.url,
      )
    case 'sendgrid':
      return json(
        bearer,
        {
          personalizations: [{ to: [{ email: mail.to }] }],
          from: { email: p.from },
          reply_to: { email: replyTo },
          subject: mail.subject,
          content: [
            { type: 'text/plain', value: mail.text },
            ...(mail.html !== undefined ? [{ type: 'text/html', value: mail.html }] : []),
          ],
        },
        p.url,
      )
    case 'mailgun': {
      const form = new URLSearchParams({ from: p.from, to: mail.to, subject: mail.subject, text: mail.text, 'h:Reply-To': replyTo })
      if (mail.html !== undefined) form.set('html', mail.html)
      return {
        url: p.url,
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
          authorization: `Basic ${Buffer.from(`api:${p.token}`).toString('base64')}`,
        },
        body: form.toString(),
      }
    }
    case 'ses': {
      // the token is ACCESS_KEY_ID:SECRET_ACCESS_KEY; the URL is the regional endpoint
      const [accessKeyId, secretAccessKey] = splitOnce(p.token)
      const url = `${p.url.replace(/\/+$/, '')}/v2/email/outbound-emails`
      const body = JSON.stringify({
        FromEmailAddress: p.from,
        Destination: { ToAddresses: [mail.to] },
        ReplyToAddresses: [replyTo],
        Content: {
          Simple: {
            Subject: { Data: mail.subject, Charset: 'UTF-8' },
            Body: {
              Text: { Data: mail.text, Charset: 'UTF-8' },
              ...h({ Html: { Data: mail.html, Charset: 'UTF-8' } }),
            },
          },
        },
      })
      const headers = { 'content-type': 'application/json' }
      const signed = signV4(
        { method: 'POST', url, headers, body },
        { accessKeyId, secretAccessKey, region: sesRegion(p), service: 'ses' },
        now,
      )
      return { url, headers: { ...headers, ...signed }, body }
    }
  }
}

function splitOnce(token: string): [string, string] {
  const i = token.indexOf(':')
  return i < 0 ? [token, ''] : [token.slice(0, i), token.slice(i + 1)]
}

/** PDS_EMAIL_SES_REGION, else the region in an `email.<region>.amazonaws.com` URL */
export function sesRegion(p: Pick<Provider, 'url' | 'sesRegion'>): string {
  return p.sesRegion ?? /^email\.([a-z0-9-]+)\.amazonaws\.com$/.exec(new URL(p.url).hostname)?.[1] ?? 'us-east-1'
}
