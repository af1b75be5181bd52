// Outgoing email: one send function, its backend chosen once at start. console: a structured log
// line with the body between two divider lines (tokens included, for development only; it warns so
// at start). http-json: a POST in the shape the configured provider takes (providers.ts), aborted
// after the configured timeout; a 4xx/5xx or network error is logged (never the body) and fails.
import { request } from '../outbound.js'
import type { Config } from '../config.js'
import type { Logger } from '../logger.js'
import { xrpcError } from '../errors.js'
import { buildRequest } from './providers.js'
import { brandMail } from './brand.js'
import type { Mail } from './message.js'

export type { Mail }
export type Mailer = { send(mail: Mail): Promise<void> }

export class MailDeliveryError extends Error {}

const DIVIDER = '-'.repeat(60)

/** with `branding`, every message is signed with the service's name and links and gets an HTML part (brand.ts) */
export function createMailer(config: Config['email'], logger: Logger, branding?: Config['branding']): Mailer {
  const inner = plainMailer(config, logger)
  if (!branding) return inner
  return { send: (mail) => inner.send(brandMail(branding, mail)) }
}

function plainMailer(config: Config['email'], logger: Logger): Mailer {
  if (config.backend === 'console') {
    return {
      async send(mail) {
        logger.info(
          { mail: { from: config.from, to: mail.to, subject: mail.subject, body: `${DIVIDER}\n${mail.text}\n${DIVIDER}` } },
          'email (console backend, not sent)',
        )
      },
    }
  }
  const { timeoutMs } = config
  return {
    async send(mail) {
      const req = buildRequest(config, mail)
      let status: number
      try {
        const res = await request(req.url, {
          method: 'POST',
          headers: req.headers,
          body: req.body,
          signal: AbortSignal.timeout(timeoutMs),
        })
        status = res.statusCode
        await res.body.dump()
      } catch (err) {
        const reason = (err as Error)?.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : String((err as Error)?.message ?? err)
        logger.error({ subject: mail.subject, reason }, 'email delivery failed')
        throw new MailDeliveryError(`email delivery failed: ${reason}`)
      }
      if (status >= 400) {
        logger.error({ subject: mail.subject, status }, 'email delivery failed')
        throw new MailDeliveryError(`email delivery failed: endpoint answered ${status}`)
      }
    },
  }
}

/** sends, turning a delivery failure into the call's error (the token stays usable) */
export async function deliver(mailer: Mailer, mail: Mail): Promise<void> {
  try {
    await mailer.send(mail)
  } catch (err) {
    if (err instanceof MailDeliveryError) throw xrpcError('UpstreamFailure', 'The email could not be sent; try again later')
    throw err
  }
}
