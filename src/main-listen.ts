import type { Dispatcher } from './dispatch/dispatcher.js';
import { createIngressHandler } from './github/ingress.js';
import { routeEvent } from './github/route.js';
import type { App } from './main.js';
import type { GitHubAnswers } from './main-github.js';
import { serverLimits } from './web/limits.js';
import { type HttpServer, listenError, reply, startHttpServer } from './web/server.js';

/** The daemon's HTTP server: webhook ingress, the OpenTelemetry receiver, /healthz. */
export async function listenForWebhooks(
  app: App,
  dispatcher: Dispatcher,
  secret: string,
  answers: Pick<GitHubAnswers, 'inbox' | 'self'>,
): Promise<HttpServer> {
  const { config } = app.loaded;
  try {
    return await startHttpServer({
      host: config.server.host,
      port: config.server.port,
      logger: app.logger,
      limits: serverLimits(config.server),
      routes: {
        ...app.telemetry.routes(),
        [config.webhook.path]: createIngressHandler({
          secret,
          maxBodyBytes: config.server.maxBodyBytes,
          inbox: answers.inbox,
          logger: app.logger,
          onAccepted: () => dispatcher.notifySoon(),
          route: (event, payload) => routeEvent(event, payload, config, undefined, answers.self),
        }),
        '/healthz': (_req, res) =>
          reply(
            res,
            200,
            JSON.stringify({ ok: true, running: dispatcher.runningCount(), pid: process.pid }),
            {
              'content-type': 'application/json',
            },
          ),
      },
    });
  } catch (error) {
    throw listenError(config.server, error);
  }
}
